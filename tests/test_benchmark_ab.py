"""The A/B harness of the benchmarks: how it reads a benchmark's figures and pairs head with base."""

from __future__ import annotations

import math

import pytest

from benchmarks.ab import figures, paired

ENDPOINT_OUTPUT = """endpoint benchmark: sizes [100, 1000], 20 calls each; load average 8.62 on 2 CPUs
   100 messages ( 0.05 MB): direct    0.96 ms, endpoint    8.49 ms, added    7.54 ms, service CPU    7.0 ms/call, \
first call   106.6 ms, 0 left out (20 calls each)
  1000 messages ( 0.49 MB): direct   19.28 ms, endpoint   61.35 ms, added   42.07 ms, service CPU   24.5 ms/call, \
first call   236.9 ms, 0 left out (20 calls each)
"""


def table(*rows: tuple[str, ...]) -> str:
    """Rows as the benchmarks print them: cells apart by runs of spaces."""
    return "\n".join("    ".join(cells) for cells in rows) + "\n"


SERVICE_OUTPUT = table(
    ("backend", "operation", "messages", "cold ms", "warm median ms", "warm p99 ms", "calls", "server CPU ms"),
    ("sqlite", "preview", "100", "122", "86.9", "972", "10", "102", "12,454", "301", "71.7"),
    ("sqlite", "generate, recall", "10,000", "2,906", "2,426", "3,213", "8", "126", "14,966", "338", "929"),
    ("backend", "operation", "median @100", "@10k", "@100k", "10k ÷ 100", "100k ÷ 100", "100k ÷ 10k", "flat?"),
    ("sqlite", "preview", "86.9", "130", "–", "1.50×", "–", "–", "no"),
)

SHIFTING_OUTPUT = table(
    ("same counter", "contextshift.shift_context", "1,000", "8,000", "0.17", "3", "0.06", "71", "–"),
    ("same counter", "langchain trim_messages", "1,000", "8,000", "13.2", "3", "0.35", "70", "77.65×"),
    ("exact o200k, growing", "contextshift + get_tokenizer('gpt-4o')", "1,020", "8,000", "6.91", "3", "0.12", "64"),
)


def test_endpoint_figures_are_read_from_each_size_line() -> None:
    assert figures("benchmarks.endpoint", ENDPOINT_OUTPUT) == {
        "endpoint ms @100": 8.49,
        "added ms @100": 7.54,
        "service CPU ms/call @100": 7.0,
        "endpoint ms @1000": 61.35,
        "added ms @1000": 42.07,
        "service CPU ms/call @1000": 24.5,
    }


def test_service_figures_come_from_the_first_table_not_the_summaries() -> None:
    assert figures("benchmarks.service", SERVICE_OUTPUT) == {
        "sqlite preview @100 warm median ms": 86.9,
        "sqlite preview @100 server CPU ms": 71.7,
        "sqlite generate, recall @10,000 warm median ms": 2426.0,
        "sqlite generate, recall @10,000 server CPU ms": 929.0,
    }


def test_shifting_figures_are_the_contextshift_rows_only() -> None:
    assert figures("benchmarks.shifting", SHIFTING_OUTPUT) == {
        "same counter | contextshift.shift_context | 1,000 msgs | 8,000": 0.17,
        "exact o200k, growing | contextshift + get_tokenizer('gpt-4o') | 1,020 msgs | 8,000": 6.91,
    }


def test_turn_cpu_figures_are_the_median_and_mean_of_its_result_line() -> None:
    output = (
        "filling 1,000 messages\n"
        "sqlite, 1,000 stored messages, 60 turns: CPU per turn median 21.4 ms, mean 23.9 ms, min 19.0 ms, "
        "max 41.2 ms (load average 0.85 on 2 CPUs)\n"
    )
    assert figures("benchmarks.turn_cpu", output) == {
        "sqlite CPU ms per turn @1,000 (median)": 21.4,
        "sqlite CPU ms per turn @1,000 (mean)": 23.9,
    }


def test_an_unknown_benchmark_gives_no_figures() -> None:
    assert figures("benchmarks.limits", ENDPOINT_OUTPUT) == {}


def test_equal_pair_ratios_give_a_zero_width_interval() -> None:
    ratio = paired([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert ratio is not None
    assert (ratio.mean, ratio.low, ratio.high, ratio.median, ratio.pairs) == pytest.approx((2.0, 2.0, 2.0, 2.0, 3))


def test_the_ratio_is_the_geometric_mean_of_the_pairs_with_a_t_interval() -> None:
    ratio = paired([1.0, 4.0], [1.0, 1.0])  # pairs 1 and 4: geometric mean 2; one degree of freedom, t = 12.706
    assert ratio is not None
    half = 12.706 * (math.log(4) / math.sqrt(2)) / math.sqrt(2)
    assert ratio.mean == pytest.approx(2.0)
    assert ratio.low == pytest.approx(2.0 * math.exp(-half))
    assert ratio.high == pytest.approx(2.0 * math.exp(half))
    assert ratio.median == pytest.approx(2.5)


def test_pairs_with_a_zero_figure_are_left_out() -> None:
    assert paired([0.0, 3.0], [1.0, 1.5]) == paired([3.0], [1.5])
    assert paired([0.0], [1.0]) is None
