"""NaN/INF search: a gradient-guided search for inputs that make a program produce NaN/INF, run in a child process.

`search` is sftl's side (it starts `runner` through the sandbox); inside the child, `core` searches with the
`torch_backend` or `tf_backend` over the margins of `unsafe_ops`, optionally guided by `soft_assertions`.
"""
