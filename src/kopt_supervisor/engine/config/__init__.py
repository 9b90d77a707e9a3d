"""kopt.toml: the schema and its defaults (`sections`: one frozen dataclass per section), and
its loading, validation with errors that name the key at fault, and the frozen copy written
back (`toml_io`). Pure: reads a file or a string, returns a `Config`. No side effects.
"""
