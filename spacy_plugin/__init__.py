"""spaCy integration of roberta-static (the registered component arrives with the spaCy plugin)."""
