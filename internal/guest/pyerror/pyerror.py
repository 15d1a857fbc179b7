# The formatter of Python exceptions shared by agentbox's drivers (package pyerror). A driver's Go
# side puts this file in place of the driver's marker line; it defines one name.


def _agentbox_pyerror(edit=None):
    """Returns describe(e), which makes the record of an exception that ended a run: its name,
    its value (str(e)) and its traceback as Python prints it, less the frame that ran the code
    (the caller's, the driver's own). The traceback is written to sys.stderr, as an uncaught
    exception's is. edit(name, text), if given, edits the traceback first (a driver's own frames).

    The builtins describe calls are bound here, when the driver starts, so user code that
    rebinds them affects only itself; sys.stderr is looked up at each call, so the traceback goes
    where the run's stderr goes."""
    import sys
    import traceback
    format_exception = traceback.format_exception
    BaseExc, b_type, b_str = BaseException, type, str

    def describe(e):
        name = b_type(e).__name__
        try:
            value = b_str(e)
        except BaseExc:
            value = "<exception str() failed>"
        tb = e.__traceback__
        if tb is not None:
            tb = tb.tb_next  # the driver's own frame
        try:
            text = "".join(format_exception(b_type(e), e, tb))
        except BaseExc:
            text = name + (": " + value if value else "") + "\n"
        if edit is not None:
            text = edit(name, text)
        try:
            sys.stderr.write(text)
        except BaseExc:
            pass
        return {"name": name, "value": value, "traceback": text}

    return describe
