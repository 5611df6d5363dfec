"""The ``/metrics`` collector (:mod:`.collector`) and its per-topic parts (:mod:`.budget`,
:mod:`.heads`); import them by their full path."""
