"""Reading: paths, folders, archives and stdin -> sources -> blocks of whole lines, each line attributed
to a rank, host, process and time."""
