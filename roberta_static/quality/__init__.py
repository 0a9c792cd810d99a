"""How good vectors are: evaluation, the layer sweep, the report."""
