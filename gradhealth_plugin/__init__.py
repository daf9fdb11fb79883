"""gradhealth: a TensorBoard tab that diagnoses gradient, weight and activation health."""

__version__ = "0.1.0"
