"""The package version, apart from `qtsearch/__init__.py`, so that modules which record it
(index manifests, caches) need not import the package facade."""

__version__ = "0.1.0"
