"""Thread kernels: scalar arguments, `with` in kernels, built-ins, device printf, levels.

Each program written here runs in the interpreter against a value computed
independently (torch / Python), and ptxas assembles its PTX for sm_90a and
sm_100a (the build of `compile`: shape-generic, scalars as kernel arguments).
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas


def _write(tmp_path, name: str, src: str) -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def _assembles(path: str) -> list[str]:
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    out = []
    for target in ("sm_90a", "sm_100a"):
        text = compile_file(path, "ptx", target)
        ptxas(text, target)
        out.append(text)
    return out


SCALAR_ARG = """
__co__ s32 [64] scale(s32 [64] a, int x) {
  s32 [64] out;
  parallel p by 2 : block
    parallel q by 32 : thread {
      int i = p * 32 + q;
      out.at(i) = a.at(i) * x + x / 2 + i % x;
    }
  return out;
}
"""


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@pytest.mark.parametrize("x", [5, -3])
def test_a_scalar_parameter_is_a_kernel_argument(tmp_path, x):
    path = _write(tmp_path, "scalar_arg.co", SCALAR_ARG)
    a = torch.randint(-50, 50, (64,), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").scale(a, x)
    want = [int(v) * x + _c_div(x, 2) + (i - _c_div(i, x) * x) for i, v in enumerate(a.tolist())]
    assert out.tolist() == want
    for text in _assembles(path):
        assert "dim_x" in text  # passed at launch, not folded into the code


def test_a_scalar_argument_round_trips_through_the_ir_text(tmp_path):
    from choreo_py import frontend, sema
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module

    path = _write(tmp_path, "scalar_arg.co", SCALAR_ARG)
    module = sema.build_module(frontend.parse_file(path))
    text = print_module(module)
    assert "scalars x: s32" in text
    assert print_module(parse_module(text)) == text


def _on_gpu(path: str, function: str, args: tuple) -> torch.Tensor:
    """`function` of `path` on a CUDA GPU, called with `args` (moved there); its result."""
    lib = choreo_py.load(path)
    gpu_args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
    got = getattr(lib, function)(*gpu_args)
    torch.cuda.synchronize()
    return got.cpu()


@pytest.mark.gpu
@pytest.mark.parametrize("x", [5, -3])
def test_a_scalar_argument_on_the_gpu(tmp_path, x):
    path = _write(tmp_path, "scalar_arg.co", SCALAR_ARG)
    a = torch.randint(-50, 50, (64,), dtype=torch.int32)
    want = choreo_py.interpret(path, target="sm_90a").scale(a, x)
    assert torch.equal(_on_gpu(path, "scale", (a, x)), want)


WITH_FOREACH = """
__co__ s32 [4, 8] w(s32 [4, 8] a) {
  s32 [4, 8] out;
  parallel p by 1 : block
    parallel q by 4 : thread {
      with index = {x, y} in [4, 8], k in 3 {
        out.at(q, 0) = 100 + #k + x;
        foreach index {
          if (x == q) { out.at(x, y) = a.at(x, y) + x * 10 + k; }
        }
        foreach c = y(1:-2:2) {
          out.at(q, c) = out.at(q, c) + 1000 + y;
        }
        foreach k, y(6:) {
          out.at(q, y) = out.at(q, y) + k;
        }
      }
    }
  return out;
}
"""


def test_with_and_foreach_in_a_kernel(tmp_path):
    """Bounded variables are 0 outside their foreach; ranges are offsets from 0 and the bound."""
    path = _write(tmp_path, "with_foreach.co", WITH_FOREACH)
    a = torch.randint(-50, 50, (4, 8), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").w(a)
    want = a + 10 * torch.arange(4, dtype=torch.int32).view(4, 1)
    want[:, [1, 3, 5]] += 1000
    want[:, 6:] += 0 + 1 + 2
    assert torch.equal(out, want)
    _assembles(path)


@pytest.mark.gpu
def test_with_and_foreach_on_the_gpu(tmp_path):
    path = _write(tmp_path, "with_foreach.co", WITH_FOREACH)
    a = torch.randint(-50, 50, (4, 8), dtype=torch.int32)
    assert torch.equal(_on_gpu(path, "w", (a,)), choreo_py.interpret(path, target="sm_90a").w(a))


LEVELS = """
__co__ s32 [4, 2, 32] grid_groups(s32 [4, 2, 32] a) {
  s32 [4, 2, 32] out;
  parallel p by 1 : block
    parallel {g0, g1} by [4, 2] : group {
      parallel t by 32 : thread
        out.at(g0, g1, t) = a.at(g0, g1, t) + g0 * 100 + g1 * 10 + #g1;
    }
  return out;
}

__co__ s32 [3, 32] one_statement(s32 [3, 32] a) {
  s32 [3, 32] out;
  parallel p by 1 : block
    parallel g by 3 : group, t by 32 : thread
      out.at(g, t) = a.at(g, t) * 2 + g;
  return out;
}

__co__ s32 [2, 2] per_group(s32 [2, 2] a) {
  s32 [2, 2] out;
  parallel p by 1 : block
    parallel {g0, g1} by [2, 2] : group-4
      out.at(g0, g1) = a.at(g0, g1) + g0 * 10 + g1;
  return out;
}
"""


def test_parallel_levels_in_one_statement_and_over_several_dimensions(tmp_path):
    """Row-major group indices (the last fastest), levels nesting left to right."""
    path = _write(tmp_path, "levels.co", LEVELS)
    lib = choreo_py.interpret(path, target="sm_90a")
    a = torch.randint(-50, 50, (4, 2, 32), dtype=torch.int32)
    g0 = torch.arange(4, dtype=torch.int32).view(4, 1, 1)
    g1 = torch.arange(2, dtype=torch.int32).view(1, 2, 1)
    assert torch.equal(lib.grid_groups(a), a + g0 * 100 + g1 * 10 + 2)
    b = torch.randint(-50, 50, (3, 32), dtype=torch.int32)
    assert torch.equal(lib.one_statement(b), b * 2 + torch.arange(3, dtype=torch.int32).view(3, 1))
    c = torch.randint(-50, 50, (2, 2), dtype=torch.int32)
    assert torch.equal(lib.per_group(c), c + torch.tensor([[0, 1], [10, 11]], dtype=torch.int32))
    _assembles(path)


@pytest.mark.gpu
def test_parallel_levels_on_the_gpu(tmp_path):
    path = _write(tmp_path, "levels.co", LEVELS)
    lib = choreo_py.interpret(path, target="sm_90a")
    a = torch.randint(-50, 50, (4, 2, 32), dtype=torch.int32)
    b = torch.randint(-50, 50, (3, 32), dtype=torch.int32)
    c = torch.randint(-50, 50, (2, 2), dtype=torch.int32)
    assert torch.equal(_on_gpu(path, "grid_groups", (a,)), lib.grid_groups(a))
    assert torch.equal(_on_gpu(path, "one_statement", (b,)), lib.one_statement(b))
    assert torch.equal(_on_gpu(path, "per_group", (c,)), lib.per_group(c))


#: builtin as written -> torch of the same (in float64)
MATH = {
    "__sin(x)": torch.sin, "__cos(x)": torch.cos, "__tan(x)": torch.tan,
    "__asin(x * 0.125f)": lambda x: torch.asin(x * 0.125),
    "__acos(x * 0.125f)": lambda x: torch.acos(x * 0.125), "__atan(x)": torch.atan,
    "__atan2(x, x - 0.3f)": lambda x: torch.atan2(x, x - 0.3), "__sinh(x)": torch.sinh,
    "__cosh(x)": torch.cosh, "__tanh(x)": torch.tanh, "__expm1(x)": torch.expm1,
    "__log1p(x + 1.5f)": lambda x: torch.log1p(x + 1.5),
    "__pow(x + 8.0f, x)": lambda x: torch.pow(x + 8, x),
    "__pow(x, 3.0f)": lambda x: torch.pow(x, 3), "__pow(x, 2.0f)": lambda x: torch.pow(x, 2),
    "__fmaf(x, 2.0f, 1.0f)": lambda x: x * 2 + 1, "__frcp_rn(x)": lambda x: 1 / x,
}
MATH_KERNEL = """
__co__ f32 [64] k(f32 [64] a) {{
  f32 [64] o;
  parallel p by 1 : block
    parallel q by 64 : thread {{
      x = a.at(q);
      o.at(q) = {call};
    }}
  return o;
}}
"""


def _emulated(path: str, a: torch.Tensor) -> torch.Tensor:
    """The sm_90a PTX of MATH_KERNEL run by the emulator (whose sin, cos, 2^x and log2 are
    correctly rounded: what it checks is the sequences built around them)."""
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", "sm_90a")
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit, not at the entry's end
    desc = {"grid": [1, 1, 1], "block": [64, 1, 1], "shared_bytes": 256,
            "params": [{"name": "ptr_a", "ptr": "a"}, {"name": "ptr_o", "ptr": "o"}],
            "tensors": {"a": {"dtype": "f32", "shape": [64]}, "o": {"dtype": "f32", "shape": [64]}}}
    out = torch.zeros(64)
    res = emulate_ptx(ptx, desc, {"a": a.clone(), "o": out})
    return res["o"] if isinstance(res, dict) else out


@pytest.mark.parametrize("call", list(MATH), ids=list(MATH))
def test_math_builtins(tmp_path, call):
    """Interpreter and the lowering's instruction sequences against torch in float64."""
    path = _write(tmp_path, "math.co", MATH_KERNEL.format(call=call))
    a = torch.linspace(-7, 7, 64, dtype=torch.float32)
    want = MATH[call](a.double())
    for got, tol in ((choreo_py.interpret(path, target="sm_90a").k(a), 1e-6),
                     (_emulated(path, a), 4e-6)):
        got = got.double()
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        ok = ~torch.isnan(want)
        assert bool(((got - want).abs()[ok] <= tol * (want.abs()[ok] + 1e-30) + 1e-30).all()), \
            (got - want).abs().max()
    _assembles(path)


@pytest.mark.gpu
def test_math_builtins_on_the_gpu(tmp_path):
    """The hardware's approximate sin/cos/2^x/log2 inside: within the programs' 2e-4."""
    for call, ref in MATH.items():
        path = _write(tmp_path, "math.co", MATH_KERNEL.format(call=call))
        a = torch.linspace(-7, 7, 64, dtype=torch.float32)
        got, want = _on_gpu(path, "k", (a,)).double(), ref(a.double())
        assert torch.equal(torch.isnan(got), torch.isnan(want)), call
        ok = ~torch.isnan(want)
        assert bool(((got - want).abs()[ok] <= 2e-4 + 2e-4 * want.abs()[ok]).all()), call


PRINTS = """
__co__ void show(int a) {
  parallel p by 2 : block {
    parallel q by 3 : thread {
      println("p=", p, ", q=", q, " a+q: ", a + q, " half ", 0.5f * q, " 100%");
    }
  }
}
"""
# one space between two arguments, floats as %g (tools/co-mock: CallBIF, Value::ToString)
PRINTED = sorted(f"p= {p} , q= {q}  a+q:  {7 + q}  half  {0.5 * q:g}  100%"
                 for p in range(2) for q in range(3))


def test_println_prints_a_line_per_thread(tmp_path, capfd):
    path = _write(tmp_path, "prints.co", PRINTS)
    choreo_py.interpret(path, target="sm_90a").show(7)
    assert sorted(capfd.readouterr().out.splitlines()) == PRINTED
    for text in _assembles(path):
        assert "call (" in text and "vprintf" in text


def test_println_round_trips_through_the_ir_text(tmp_path):
    from choreo_py import frontend, sema
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module

    path = _write(tmp_path, "prints.co", PRINTS)
    text = print_module(sema.build_module(frontend.parse_file(path)))
    assert "print 'p= ', p, ' , q= ', q" in text
    assert print_module(parse_module(text)) == text


def test_stream_program_prints_its_values(capfd):
    import os

    from end2end_refs import END2END, need_file

    choreo_py.interpret(need_file(os.path.join(END2END, "stream.co")), target="sm_90a").foo(100)
    assert sorted(capfd.readouterr().out.split()) == [str(100 + p) for p in range(6)]


@pytest.mark.gpu
def test_println_on_the_gpu(tmp_path, capfd):
    path = _write(tmp_path, "prints.co", PRINTS)
    choreo_py.load(path).show(7)
    torch.cuda.synchronize()  # device printf is flushed at a synchronisation
    assert sorted(capfd.readouterr().out.splitlines()) == PRINTED


SHAPES = """
__co__ void shapes(int x) {
  a : [7, 8, x];
  ituple<3> b = {1, x, 3};
  parallel p by 1 : block {
    parallel q by 2 : thread {
      println("a=", a, " b=", b, " q=", q);
    }
  }
}
"""


def test_println_of_an_mdspan_and_an_ituple(tmp_path, capfd):
    """An mdspan prints as its extents in brackets, an ituple as its elements in braces."""
    path = _write(tmp_path, "shapes.co", SHAPES)
    choreo_py.interpret(path, target="sm_90a").shapes(9)
    assert sorted(capfd.readouterr().out.splitlines()) == [
        f"a= [7, 8, 9]  b= {{1, 9, 3}}  q= {q}" for q in range(2)]
    for text in _assembles(path):
        assert "vprintf" in text


CHUNK_TUPLE = """
__co__ s32 [4, 8] tiles(s32 [4, 8] a) {
  s32 [4, 8] out;
  parallel p by 1 : block
    parallel q by 1 : thread
      with index = {x, y} in [2, 2] {
        foreach index {
          l = dma.copy a.chunkat(index) => local;
          dma.copy l.data => out.chunkat(y, x);
        }
      }
  return out;
}
"""


def test_chunkat_of_a_bounded_ituple(tmp_path):
    """`chunkat(index)` of `index = {x, y}` is `chunkat(x, y)`: tile (x, y) lands at (y, x)."""
    path = _write(tmp_path, "chunk_tuple.co", CHUNK_TUPLE)
    a = torch.randint(-50, 50, (4, 8), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").tiles(a)
    assert torch.equal(out, a.view(2, 2, 2, 4).permute(2, 1, 0, 3).reshape(4, 8))
    _assembles(path)


@pytest.mark.gpu
def test_chunkat_of_a_bounded_ituple_on_the_gpu(tmp_path):
    path = _write(tmp_path, "chunk_tuple.co", CHUNK_TUPLE)
    a = torch.randint(-50, 50, (4, 8), dtype=torch.int32)
    assert torch.equal(_on_gpu(path, "tiles", (a,)),
                       a.view(2, 2, 2, 4).permute(2, 1, 0, 3).reshape(4, 8))


SHADOW = """
__co__ s32 [2, 32] shadow(s32 [2, 32] a) {
  s32 [2, 32] out;
  parallel p by 1 : block {
    shared s32 [2, 32] buf;
    dma.copy a => buf;
    parallel g by 2 : group {
      shared s32 [2, 32] buf;
      parallel t by 32 : thread
        buf.at(g, t) = g * 1000 + t;
    }
    parallel g by 2 : group, t by 32 : thread
      out.at(g, t) = buf.at(g, t) + 1;
  }
  return out;
}
"""


def test_an_inner_declaration_shadows_an_outer_one(tmp_path):
    """The inner `buf` is a buffer of its own: the outer one still holds `a`."""
    path = _write(tmp_path, "shadow.co", SHADOW)
    a = torch.randint(-50, 50, (2, 32), dtype=torch.int32)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").shadow(a), a + 1)
    _assembles(path)


UNNAMED_COPY = """
__co__ s32 [4, 32] unnamed(s32 [4, 32] a) {
  s32 [4, 32] out;
  parallel p by 4 : block {
    dma.copy a.chunkat(p, _) => shared;
    parallel t by 1 : thread {
      dma.copy a.chunkat(p, _) => local;
      foreach j in [32]
        out.at(p, j) = a.at(p, j) + 1;
    }
  }
  return out;
}
"""


def test_a_copy_into_an_unnamed_implicit_buffer_runs(tmp_path):
    """Nothing reads its data, but the program compiles and runs (the copies included)."""
    path = _write(tmp_path, "unnamed.co", UNNAMED_COPY)
    a = torch.randint(-50, 50, (4, 32), dtype=torch.int32)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").unnamed(a), a + 1)
    for text in _assembles(path):
        assert "ld.global" in text


COMPOSE = """
__co__ s32 [64] compose(s32 [64] a) {
  s32 [64] out;
  parallel p by 2 : block
    parallel x by 4 : thread
      foreach j in [8]
        out.at((p # x) * 8 + j) = a.chunkat(p # x).at(j) * 2 + p * 100 + x;
  return out;
}
"""


def test_composed_bounded_variables(tmp_path):
    """`p # x` is p * #x + x, bounded by #p * #x: chunk p # x of 8 is a[(p*4 + x)*8 ...]."""
    path = _write(tmp_path, "compose.co", COMPOSE)
    a = torch.randint(-50, 50, (64,), dtype=torch.int32)
    i = torch.arange(64, dtype=torch.int32)
    want = a * 2 + (i // 32) * 100 + (i // 8) % 4
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").compose(a), want)
    _assembles(path)


SPAN_AS = """
__co__ f32 [32, 18, 9] reshape(f32 [32, 18, 9] a) {
  f32 [a.span] out;
  parallel p by 3 : block
    parallel q by 1 : thread
      with index = {x, y} in [4, 4] {
        foreach index {
          t = dma.copy a.span_as([18, 8, 36]).chunkat(p, x, y) => local;
          dma.copy t.data => out.span_as([18, 8, 36]).chunkat(p, x, y);
        }
        l = dma.copy a.span_as([144, 36]).chunkat(p, _) => local;
        foreach i in [48]
          out.span_as([144, 36]).at(p * 48 + i, 0) = l.data.span_as([48 * 36]).at(i * 36) + 1.0f;
      }
  return out;
}
"""


def test_span_as_reshapes_whole_data(tmp_path):
    """Tiles of an [18, 8, 36] reshape copied across; column 0 of a [144, 36] one, plus 1
    (block p owns rows 48p.. of both)."""
    path = _write(tmp_path, "span_as.co", SPAN_AS)
    a = torch.randn(32, 18, 9)
    out = choreo_py.interpret(path, target="sm_90a").reshape(a)
    want = a.clone().view(144, 36)
    want[:, 0] += 1.0
    assert torch.equal(out.view(144, 36), want)
    _assembles(path)


SPAN_AS_TILE = """
__co__ f32 [10, 9, 8] part(f32 [10, 9, 8] a) {
  f32 [a.span] out;
  parallel p by 5 : block
    parallel q by 1 : thread {
      t = dma.copy a.subspan(2, 9, 8).at(p, 0, 0).span_as([16, 9]) => local;
      foreach {i, j} in [16, 9]
        out.subspan(2, 9, 8).at(p, 0, 0).span_as([16, 9]).at(i, j) = t.data.at(i, j) * 2.0f;
      u = dma.copy a.subspan(2, 9, 8).at(p, 0, 0).subspan(1, 9, 8).at(1, 0, 0).sqz()
                    .span_as([3, 3, 8]) => local;
      foreach {i, j, k} in [3, 3, 8]
        out.at(p * 2 + 1, i * 3 + j, k) = u.data.at(i, j, k) + 1.0f;
    }
  return out;
}
"""


def test_span_as_of_a_contiguous_tile(tmp_path):
    """The p-th [2, 9, 8] tile as [16, 9], then its second row (squeezed) as [3, 3, 8]."""
    path = _write(tmp_path, "span_as_tile.co", SPAN_AS_TILE)
    a = torch.randn(10, 9, 8)
    want = a * 2
    want[1::2] = a[1::2] + 1
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").part(a), want)
    _assembles(path)


def test_span_as_of_part_of_a_tensor_is_refused_by_name(tmp_path):
    from choreo_py.diagnostics import ChoreoError

    path = _write(tmp_path, "part.co", """
__co__ void part(f32 [10, 9, 8] a) {
  parallel p by 5 : block
    dma.copy a.subspan(2, 3, 8).at(p, 0, 0).span_as([6, 8]) => shared;
}
""")
    with pytest.raises(ChoreoError, match="'span_as' of a part of a tensor or buffer that is "
                                          "not a contiguous tile"):
        compile_file(path, "ptx", "sm_90a")


def test_span_as_round_trips_through_the_ir_text(tmp_path):
    from choreo_py import frontend, sema
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module

    path = _write(tmp_path, "span_as.co", SPAN_AS)
    text = print_module(sema.build_module(frontend.parse_file(path)))
    assert "alias a__as0 = a[18, 8, 36]" in text
    assert print_module(parse_module(text)) == text


@pytest.mark.gpu
def test_span_as_on_the_gpu(tmp_path):
    path = _write(tmp_path, "span_as.co", SPAN_AS)
    a = torch.randn(32, 18, 9)
    assert torch.equal(_on_gpu(path, "reshape", (a,)),
                       choreo_py.interpret(path, target="sm_90a").reshape(a))


def test_a_dimension_beyond_32_bits_is_an_error(tmp_path):
    """Found by the fuzzer once scalar parameters compiled: a loop over such a shape gave
    ptxas a constant it cannot hold."""
    from choreo_py.diagnostics import ChoreoError

    path = _write(tmp_path, "huge.co", """
__co__ void huge(int N, s32 [2, 99999999999999999999] lhs) {
  parallel p by 6 {
    foreach index in lhs.span if (p < N) {}
  }
}
""")
    with pytest.raises(ChoreoError, match="the dimension 99999999999999999999 is too large") as e:
        compile_file(path, "ptx", "sm_90a")
    assert e.value.loc.line == 2


EVENT_AND_SCALAR = """
__co__ s32 [128] r(s32 [128] a, int x) {
  s32 [128] out;
  parallel p by 1 : block {
    shared event e;
    parallel g by 2 : group-4 {
      inthreads.async (g == 0) {
        trigger e;
      }
      inthreads.async (g == 1) {
        wait e;
      }
    }
    parallel t by 128 : thread
      out.at(t) = a.at(t) + x;
  }
  return out;
}
"""


def test_a_scalar_in_an_event_kernel_is_an_argument(tmp_path):
    """An MMA/event kernel takes its scalar parameters as arguments, as a thread kernel
    does (lowering/core/params.py): the shape-generic build keeps `x` (what refuses this
    kernel is the element store of its second region, after the first joins), and the interpreter runs it with the call's value."""
    from choreo_py.diagnostics import ChoreoError

    path = _write(tmp_path, "event_scalar.co", EVENT_AND_SCALAR)
    with pytest.raises(ChoreoError, match="a store to a buffer element") as e:
        compile_file(path, "ptx", "sm_90a")
    assert "scalar parameter" not in e.value.message
    a = torch.randint(-50, 50, (128,), dtype=torch.int32)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").r(a, 5), a + 5)
