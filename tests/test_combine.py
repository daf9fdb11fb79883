"""combine.py: advice led by the fix for a named cause, without saying that fix twice."""

from gradhealth_plugin.analysis import combine
from gradhealth_plugin.analysis.detectors import nonfinite, spike
from gradhealth_plugin.analysis.finding import Finding


def _finding(kind: str, advice: str, cause: str) -> Finding:
    return Finding(run="r", kind=kind, severity="critical", layers=["loss"], first_step=1, last_step=2,
                   evidence={}, message="", advice=advice, cause=cause)


def test_a_kinds_advice_that_opens_with_the_causes_fix_does_not_say_it_again():
    f = _finding("nonfinite", nonfinite.ADVICE, "learning_rate_too_high")
    combine.advise_causes([f])
    assert f.advice.startswith("Lower the learning rate (3-10x")
    assert f.advice.lower().count("lower the learning rate") == 1, f.advice
    # The rest of the kind's own advice still follows.
    assert "Should it persist at a lower rate: Clip gradients (tf.clip_by_global_norm" in f.advice, f.advice


def test_a_kinds_advice_of_other_fixes_follows_the_causes_whole():
    f = _finding("spike", spike.ADVICE, "learning_rate_too_high")
    combine.advise_causes([f])
    assert f.advice.endswith("Should it persist at a lower rate: " + spike.ADVICE), f.advice
