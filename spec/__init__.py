"""The typed job spec: models, loading with source locations, JSON Schema."""
