"""Finding the installed targets: ``registry`` loads them from their entry points (each in
its isolated host), ``adapter_declarations`` reads what each declares (options, flags,
expectations) in a one-shot child, ``declcache`` keeps what was read across sessions."""
