"""kopt front door: the `kopt` command line and the Textual app; a pure client of `engine`."""
