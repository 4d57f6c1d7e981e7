"""Job files: the types every format shares (``base``), one module per job.yml format
(``format_0_9``, ``format_0_14``) and the dispatch between them (``parse``).

A format module answers four things: whether a parsed document is written in it
(``is_format``), how to check and build it (``build_job``), how it is stored
(``job_to_dict``, ``is_stored``) and how a stored job reads as the steps a session walks
(``runtime_view``). A third format is one more module listed in ``parse.FORMATS``.
"""
