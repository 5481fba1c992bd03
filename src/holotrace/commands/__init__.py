"""One module per ``holotrace`` subcommand (``add_parser`` + ``run``)."""
