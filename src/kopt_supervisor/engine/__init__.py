"""kopt engine: a library with no UI imports that owns all state and side effects."""
