"""Choreo words for the compiler's node classes, for messages a user reads.

A message that refuses or rejects a statement names it the way the program
spells it (`dma.copy`, `a store to a buffer element`), never by the Python
class that holds it (`DmaOp`, `BufStore`): the user wrote Choreo, not the
compiler's data structures. Every class of the AST (`choreo_py.frontend.ast`), the
tile IR (`choreo_py.ir`) and sema's values has an entry;
tests/test_construct_names.py fails when a new class lacks one.
"""
from __future__ import annotations

#: AST node classes (what the parser builds from the source).
AST_WORDS = {
    "Node": "a construct", "Expr": "an expression", "Stmt": "a statement",
    "Program": "the program", "HostCode": "host code", "DeviceCode": "__device__ code",
    "FunctionDef": "a function definition", "Param": "a parameter", "TypeRef": "a type",
    "DimWildcard": "a '?' dimension", "MdSpanType": "an mdspan type",
    "Name": "a name", "IntLit": "an integer literal", "FloatLit": "a floating-point literal",
    "BoolLit": "a boolean literal", "StringLit": "a string literal", "NullPtr": "nullptr",
    "Unary": "a unary operator", "Binary": "a binary operator",
    "Ternary": "a conditional expression (?:)", "UBound": "an upper bound (#name)",
    "SizeOf": "|x| (a size)", "ITupleLit": "an index tuple {...}", "MdSpanLit": "a shape [...]",
    "DimIndex": "a dimension access (x(i))", "Index": "an index x[i]",
    "ITupleSelect": "an index-tuple element", "DimOf": "a dimension of a shape (.span)",
    "Member": "a member access (x.y)", "MethodCall": "a method call (x.f(...))",
    "CallExpr": "a call", "Call": "a call", "Cast": "a cast",
    "Block": "a block { ... }", "Attribute": "an attribute [[...]]",
    "ExprStmt": "an expression statement", "Assign": "an assignment",
    "MdSpanDecl": "an mdspan declaration", "ITupleDecl": "an index-tuple declaration",
    "ScalarDecl": "a scalar declaration", "BufferDecl": "a buffer declaration",
    "FragDecl": "a fragment declaration", "EventDecl": "an event declaration",
    "ParallelLevel": "a parallel level (: block, : group-4, ...)",
    "ParallelBy": "a parallel ... by ... region", "InThreads": "an inthreads region",
    "WithBinding": "a with binding", "WhereBind": "a where binding", "With": "a with block",
    "LoopRange": "a loop range", "LoopAttr": "a loop attribute", "Foreach": "a foreach loop",
    "Apply": "an apply", "If": "an if", "While": "a while loop", "Return": "a return",
    "Break": "a break", "Continue": "a continue", "Yield": "a yield", "Wait": "a wait",
    "Trigger": "a trigger", "Swap": "a swap", "Sync": "a sync",
    "StorageTarget": "a storage target (=> local/shared)", "BufferMap": "a buffer mapping",
    "PadConfig": "a padding configuration", "DmaOp": "a dma/tma copy", "Modifier": "a modifier",
    "MmaFill": "mma.fill", "MmaLoad": "mma.load", "MmaOp": "an mma operation",
    "MmaStore": "mma.store", "MmaScale": "mma.scale", "AsmOperand": "an asm operand",
    "AsmStmt": "inline asm", "InlineCpp": "inline C++ code",
    "IntrinsicDirective": "an intrinsic directive", "Pragma": "a #pragma",
}

#: Tile IR classes (what sema builds; the interpreter and the backends read).
IR_WORDS = {
    "Expr": "an expression", "Const": "a constant", "Sym": "a name", "Bin": "a binary operator",
    "Un": "a unary operator", "Select": "a conditional expression (?:)", "Call": "a call",
    "Elem": "a fragment element", "BufElem": "a buffer element", "View": "a view",
    "EventRef": "an event", "FutureRef": "a future", "Param": "a parameter",
    "Buffer": "a buffer", "RunBuffer": "a shared buffer sized at run time", "Event": "an event", "Frag": "a fragment", "Stmt": "a statement",
    "Let": "a named value", "Var": "a mutable variable", "Assign": "an assignment",
    "ViewDef": "a view definition", "For": "a foreach loop", "While": "a while loop",
    "If": "an if", "Break": "a break", "Continue": "a continue",
    "Parallel": "a parallel region", "Role": "an inthreads.async role",
    "SetMaxRegs": "setreg_inc/setreg_dec", "TmaLoad": "tma.load", "TmaStore": "tma.copy (store)",
    "DmaCopy": "dma.copy", "Wait": "a wait", "Trigger": "a trigger",
    "RoleSync": "a collective copy's synchronization", "SyncShared": "sync.shared",
    "SyncWarp": "sync.barrier : group",
    "GridSync": "a grid-wide barrier (sync.barrier : block in a cooperative launch)",
    "Fence": "sync.fence",
    "NamedBarrier": "a named barrier (__bar_sync / __bar_arrive)",
    "FragDecl": "a fragment declaration", "MmaFill": "mma.fill", "Mma": "an mma operation",
    "MmaStore": "mma.store", "MmaLoad": "mma.load",
    "SparseMma": "a sparse mma (mma.row.row.sp, 2:4 structured-sparse A)",
    "WarpMma": "a warp's mma on register fragments (mma.sync / WMMA)",
    "ElemStore": "a store to a fragment element",
    "BufStore": "a store to a buffer element (per-thread buffer code)",
    "Apply": "an apply", "Reduce": "a reduction (reduce_max / reduce_sum)",
    "AllReduce": "an all-reduce across threads", "FragCopy": "a fragment copy",
    "Launch": "a launch", "HostCall": "a call of a __co__ function", "Assert": "an assert", "Print": "println", "Yield": "a yield",
    "Asm": "inline asm", "AsmOperand": "an asm operand",
    "Alias": "a reshaped view (span_as)", "GridDim": "a grid dimension", "Kernel": "a kernel",
    "TmemRegion": "a tensor-memory region", "TmemMap": "a tensor-memory map",
    "Function": "a __co__ function", "Module": "a module",
}

#: Sema's values (what a name in a kernel can stand for).
VALUE_WORDS = {
    "Value": "a value", "Scalar": "a scalar", "ShapeValue": "a shape", "ITupleValue": "an index tuple",
    "BoundedTuple": "a bounded index tuple (with)",
    "TilingValue": "a tiling (chunkat/subspan)", "Tensor": "a global tensor",
    "BufferValue": "a buffer", "EventValue": "an event", "ViewValue": "a view",
    "FutureValue": "a future", "FragValue": "a fragment", "FragmentValue": "a fragment",
    "Opaque": "a value the tile IR does not model yet",
}


def describe(node) -> str:
    """The Choreo words for `node` (an AST node, an IR statement or expression, a value)."""
    name = type(node).__name__ if not isinstance(node, type) else node.__name__
    module = (type(node) if not isinstance(node, type) else node).__module__
    if module.endswith(".ir"):
        table = IR_WORDS
    elif module.endswith(".ast"):
        table = AST_WORDS
    else:
        table = VALUE_WORDS
    return table.get(name) or AST_WORDS.get(name) or IR_WORDS.get(name) or "this construct"
