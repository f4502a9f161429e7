"""privfl: differentially private federated learning with privacy numbers you can trust."""

__version__ = "0.1.0"
