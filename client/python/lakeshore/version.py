"""The package's version: what a worker says of itself (docs/contract.md, "Workers"); pyproject.toml's."""
__version__ = "0.1.0"
