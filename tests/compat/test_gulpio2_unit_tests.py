"""gulpio2 0.0.4's own unit tests, run unchanged against gulpio_rs (``import gulpio2`` resolves
to ``gulpio_rs``; see gulpio2_suite.py), and against gulpio2 itself in the same environment.

Every test that gulpio2 passes here must pass against gulpio_rs too. The comparison is per test
and in the same environment because some of gulpio2's tests depend on it: the four
``TestBurstVideoIntoFrames`` tests need an ``ffmpeg`` binary and video files of gulpio2's
repository that are not fetched, so without them they fail for both.
"""

from __future__ import annotations

import gulpio2_suite
import pytest

pytest.importorskip(
    "gulpio2",
    reason="gulpio2==0.0.4 is installed by .ci/run; the compatibility promise is tested against it",
)

#: fileio_tests.py 44, utils_tests.py 18, sanity_utils_tests.py 14.
SUITE_SIZE = 76
#: Tests that may fail for gulpio2 itself here, and why. Everything else it must pass, so the
#: comparison below is between two working runs.
ENVIRONMENT_FAILURES = {
    # img[10:15] = 256 on a uint8 array: NumPy 2 raises OverflowError.
    "utils_tests.py::TestReadingAndWritingJpegs::test_gray_image_round_trip",
    # An ffmpeg binary and gulpio2's test.mp4 / test.webm (not fetched).
    "utils_tests.py::TestBurstVideoIntoFrames::test_mp4",
    "utils_tests.py::TestBurstVideoIntoFrames::test_mp4_with_lower_frame_rate",
    "utils_tests.py::TestBurstVideoIntoFrames::test_webm",
    "utils_tests.py::TestBurstVideoIntoFrames::test_webm_with_lower_frame_rate",
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    if gulpio2_suite.missing():
        try:
            gulpio2_suite.fetch()
        except OSError as e:
            pytest.skip(
                f"gulpio2's unit tests are not in {gulpio2_suite.cache_dir()} and cannot be "
                f"downloaded ({e}); `python tests/compat/gulpio2_suite.py fetch` (.ci/run does)"
            )
    work = tmp_path_factory.mktemp("gulpio2-suite")
    return gulpio2_suite.run_suite("gulpio2", work), gulpio2_suite.run_suite("gulpio_rs", work)


def _failed(results: dict[str, str]) -> set[str]:
    return {test for test, outcome in results.items() if outcome != "passed"}


def test_the_suite_runs_against_gulpio2(outcomes):
    reference, _ = outcomes
    assert len(reference) == SUITE_SIZE
    assert _failed(reference) <= ENVIRONMENT_FAILURES


def test_gulpio_rs_passes_every_test_gulpio2_passes(outcomes):
    reference, ours = outcomes
    assert set(ours) == set(reference)
    assert sorted(_failed(ours) - _failed(reference)) == []
