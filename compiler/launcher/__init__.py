"""The launcher: the program every TensorFlow pod runs around its training command.

Its modules are shipped to the pods as they are, in one zip application (the compiler reads
them from the installed package and zips them as the package `tfcompile_launcher`, with
`start.py` as the zip's `__main__.py`; `output/launcher_zip.py` builds it), so they import
nothing but the standard library and each other (relatively), and keep to the Python that
TensorFlow images have (3.8 and later). `program.py` is the launcher's main and says what it
does; `records.py` what it keeps, `gate.py` the revision gate, `results.py` a sweep trial's
result, `api_server.py` its calls to the API server, `messages.py` its log lines, and
`protocol.py` the words the compiler shares with it (no I/O: the compiler proper imports it
alone).
"""
