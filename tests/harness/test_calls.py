"""The judge's windows (kforge_harness.calls): the time a call counts for comes from the judge's
clock; what the subject says can lengthen a call, never shorten it."""

from kforge_harness import calls
from kforge_harness.policy import Policy

POLICY = Policy(budget_s=10.0, min_reps=10, max_reps=10, warmup_min=2, warmup_s=0.0)


def _subject(window_ms, said):
    """call(warm) for calls.loop: every window is ``window_ms``; the subject says ``said``."""

    def call(warm):
        return window_ms, ({"ms": said} if said is not None else {})

    return call


def test_a_subject_that_says_its_calls_were_short_is_timed_by_the_window():
    # a slowed clock, a forged reply, an event recorded late: the runner claims 1 us per call
    r = calls.loop(_subject(50.0, 0.001), POLICY, overhead_ms=0.5)
    assert r["median_ms"] == 49.5 and r["trials"] == 10 and r["own_over_window"] == 0, r


def test_a_subject_figure_longer_than_its_window_is_not_believed():
    r = calls.loop(_subject(2.0, 500.0), POLICY, overhead_ms=0.5)
    assert r["median_ms"] == 1.5 and r["own_over_window"] == 10, r


def test_the_subjects_figure_counts_where_the_channel_was_quicker_than_its_median():
    # the channel's cost varies: where the window less the median overhead is below the subject's
    # own (believable) figure, the latter counts
    r = calls.loop(_subject(1.2, 1.0), POLICY, overhead_ms=0.5)
    assert r["median_ms"] == 1.0, r
    r = calls.loop(_subject(1.2, None), POLICY, overhead_ms=0.5)
    assert abs(r["median_ms"] - 0.7) < 1e-9, r


def test_warm_up_calls_are_not_counted():
    seen = []

    def call(warm):
        seen.append(warm)
        return (1000.0 if warm else 3.0), {}

    r = calls.loop(call, POLICY, overhead_ms=1.0)
    assert seen[:2] == [True, True] and seen.count(True) == 2 and r["median_ms"] == 2.0, r


def test_overhead_is_the_median_of_the_null_calls_after_two_unmeasured():
    windows = iter([100.0, 100.0] + [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    assert calls.overhead(lambda: next(windows)) == 5.0
