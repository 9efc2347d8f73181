"""letterbox: a Python message broker speaking the Apache Pulsar binary protocol."""

__version__ = "0.1.0"
