"""The text layer: HTA's name shortening, the one name formatter, the sanitiser, number formats.

Names are real kernel names from the trace corpus (the pairs that printed alike before: elementwise kernels
whose names differ only inside their template arguments)."""

from __future__ import annotations

import pytest

import holotrace
from corpus import DATA
from holotrace.text import fit_name, fit_names, fmt_count, hta_short_names, sanitize, structural_forms

MUL = (
    "void at::native::vectorized_elementwise_kernel<2, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
    "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 2>)"
)
EQ = (
    "void at::native::vectorized_elementwise_kernel<2, at::native::AUnaryFunctor<int, int, bool, "
    "at::native::(anonymous namespace)::CompareEqFunctor<int> >, at::detail::Array<char*, 2> >(int, "
    "at::native::AUnaryFunctor<int, int, bool, at::native::(anonymous namespace)::CompareEqFunctor<int> >, "
    "at::detail::Array<char*, 2>)"
)
CLAMP = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "clamp_min_scalar_kernel_impl(at::TensorIterator&, c10::Scalar)::{lambda()#1}::operator()() const::"
    "{lambda()#8}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::clamp_min_scalar_kernel_impl(at::TensorIterator&, c10::Scalar)::"
    "{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2>)"
)
CAT = (
    "at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>(float*, "
    "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 64, 64>, "
    "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
)
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
COPIES = ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoD (Device -> Device)", "Memcpy DtoH (Device -> Pageable)"]
REAL = [MUL, EQ, CLAMP, CAT, NCCL, *COPIES]


def test_hta_short_names_as_hta():
    got = hta_short_names(
        [
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, 1>(int*, int)",
            "Memcpy DtoD (Device -> Device)",
            "a>b(c)",
            "operator<(a)",
            "a (b) c",
            "plain",
        ]
    ).tolist()
    assert got == [
        "at::native::::CatArrayBatchedCopy",
        "Memcpy DtoD (Device -> Device)",
        "b",
        "operator<",
        "c",
        "plain",
    ]


def test_structure_steps_void_arguments_templates_namespaces():
    assert structural_forms(MUL) == [
        MUL,
        "at::native::vectorized_elementwise_kernel<2, at::native::AUnaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >",
        "at::native::vectorized_elementwise_kernel<…>",
        "vectorized_elementwise_kernel<…>",
    ]
    assert structural_forms(NCCL)[1:] == ["ncclKernel_AllReduce_RING_LL_Sum_float"] * 3
    # copies keep their direction; names without structure are left alone
    assert all(structural_forms(c) == [c] * 4 for c in COPIES + ["plain", "ProfilerStep#3"])


def test_anonymous_namespace_stays_readable():
    forms = structural_forms(CAT)
    assert forms[1] == "at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>"
    assert forms[2] == "at::native::(anonymous namespace)::CatArrayBatchedCopy<…>"
    assert forms[3] == "CatArrayBatchedCopy<…>"
    assert "::::" not in "".join(fit_names([CAT], w)[0] for w in range(10, 120, 7))


@pytest.mark.parametrize("width", [12, 20, 30, 40, 50, 60, 80, 120])
def test_distinct_names_never_print_alike(width):
    shown = fit_names(REAL, width)
    assert len(set(shown)) == len(REAL)
    # the fewest steps that fit: a name that fits whole is printed whole
    for full, s in zip(REAL, shown):
        if len(full) <= width:
            assert s == full


def test_the_look_alike_pair_keeps_its_distinguishing_part():
    mul, eq, clamp = fit_names([MUL, EQ, CLAMP], 60)
    assert "float" in mul and "int" in eq and "4" in clamp
    assert all(s.startswith("vectorized_elementwise_kernel<") for s in (mul, eq, clamp))
    assert all(len(s) <= 60 for s in (mul, eq, clamp))
    # alone (no look-alike in the table) the shortest structural form is enough
    assert fit_name(MUL, 40) == "vectorized_elementwise_kernel<…>"
    assert fit_name(MUL, 40, others=[EQ]) != fit_name(EQ, 40, others=[MUL])


def test_wide_prints_full_names_and_a_name_that_fits_is_untouched():
    assert fit_names(REAL, None) == REAL
    assert fit_names(["short", "void f(int)"], 80) == ["short", "void f(int)"]


def test_repeated_names_print_the_same():
    assert fit_names([MUL, EQ, MUL], 40) == [
        fit_names([MUL, EQ], 40)[0],
        fit_names([MUL, EQ], 40)[1],
        fit_names([MUL, EQ], 40)[0],
    ]


def test_control_characters_are_escaped_in_every_form():
    evil = "void \x1b]0;pwned\x07k<\x1b[31mint>(int)"
    for s in structural_forms(evil) + fit_names([evil], 10) + fit_names([evil], None):
        assert "\x1b" not in s and "\x07" not in s
    assert sanitize("a\x1b[2Jb\u202e") == "a\\x1b[2Jb\\u202e"


def test_counts_name_their_unit():
    assert fmt_count(1, "step") == "1 step" and fmt_count(3, "step") == "3 steps"
    assert fmt_count(2, "rank") == "2 ranks"


def test_bundled_kernel_names_never_print_alike():
    """Every distinct GPU kernel name of every bundled trace, at a narrow and a usual width."""
    for job_dir in sorted((DATA / "traces").iterdir()):
        job = holotrace.load(job_dir, cache=False)
        names = sorted({n for r in job.ranks for n in job.rank(r).events["name"].astype(str).unique()})
        for width in (24, 48):
            shown = fit_names(names, width)
            assert len(set(shown)) == len(names), job_dir.name
