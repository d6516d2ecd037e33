"""Beyond the fixed catalog: schedules drawn from XTC's search strategies (``explore``) and
the reduction of a failing case to the smallest that fails the same way (``shrink``)."""
