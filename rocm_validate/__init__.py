"""rocm_validate: is this GPU node's ML stack correct, as fast as it was, and still converging?

Importing the package imports neither torch nor any GPU library; the heavy parts load
inside the fixtures and commands that need them.
"""

__version__ = "0.1.0"
