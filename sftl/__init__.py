"""sftl: bug-report triage and fault localization for PyTorch and TensorFlow."""

__version__ = "0.1.0"
