"""One reading of a release: its code graph, from public names to ops, kernels, registrations and message literals.

Built once per release from its sources and kept on disk beside the candidates' corpus; every localizer walks it
instead of re-reading the release's C++ on its own.
"""
