package router

import (
	"fmt"
	"math/rand"
	"strings"
)

// pygen writes random Python programs made of what the router's rules look at (imports in every
// context, handlers that give up or carry on, conditions on the version and the platform,
// suppress, import calls, the uses of threads, processes and sockets) and of what the fast
// parser must read or refuse (f-strings, lambdas, comprehensions, decorators, comments in odd
// places, soft keywords as names). Most programs are valid; some constructs are valid Python
// that tree-sitter reads with an error, or that the fast path refuses.
type pygen struct {
	r   *rand.Rand
	b   strings.Builder
	ind int
}

func genProgram(seed int64) string {
	g := &pygen{r: rand.New(rand.NewSource(seed))}
	for n := 1 + g.r.Intn(8); n > 0; n-- {
		g.stmt(0)
	}
	return g.b.String()
}

func (g *pygen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g *pygen) chance(p float64) bool    { return g.r.Float64() < p }

func (g *pygen) line(s string) {
	g.b.WriteString(strings.Repeat("    ", g.ind))
	g.b.WriteString(s)
	if g.chance(0.1) {
		g.b.WriteString("  " + g.comment())
	}
	g.b.WriteString("\n")
	if g.chance(0.05) {
		g.b.WriteString(strings.Repeat(" ", g.r.Intn(4*g.ind+5)) + g.comment() + "\n")
	}
	if g.chance(0.05) {
		g.b.WriteString("\n")
	}
}

func (g *pygen) comment() string {
	return g.pick("# c", "# raise later", "# sys.exit(1)", "# ImportError", "# see x.ImportError", "# suppress(ImportError)",
		"# import pandas", "# Thread", "# os.system('x')", "# noqa", "# type: ignore", "# x.Exception")
}

func (g *pygen) module() string {
	return g.pick("json", "os", "os.path", "sys", "numpy", "pandas", "matplotlib.pyplot", "threading", "subprocess",
		"socket", "asyncio", "concurrent.futures", "importlib", "typing", "torch", "_thread", "ctypes", "encodings", "re")
}

func (g *pygen) name() string {
	return g.pick("x", "y", "np", "pd", "match", "type", "print", "case", "_", "Thread", "system", "fork", "run",
		"os", "asyncio", "threading", "importlib", "il", "import_module", "__import__", "TYPE_CHECKING", "sys", "exec")
}

func (g *pygen) block(depth int) {
	g.ind++
	for n := 1 + g.r.Intn(3); n > 0; n-- {
		g.stmt(depth + 1)
	}
	g.ind--
}

// suite writes a compound statement's body, on its line or indented.
func (g *pygen) suite(head string, depth int) {
	if g.chance(0.15) {
		g.line(head + " " + g.simple(depth))
		return
	}
	g.line(head)
	g.block(depth)
}

func (g *pygen) stmt(depth int) {
	if depth > 3 {
		g.line(g.simple(depth))
		return
	}
	switch g.r.Intn(14) {
	case 0, 1:
		g.line(g.importStmt())
	case 2:
		g.suite("try:", depth)
		for n := g.r.Intn(3); n >= 0; n-- {
			g.suite(g.pick("except:", "except ImportError:", "except ImportError as e:", "except (ImportError, ValueError):",
				"except (ValueError, ModuleNotFoundError) as e:", "except Exception:", "except builtins.ImportError:",
				"except ValueError:", "except (ImportError):", "except ():", "except (A, (ImportError, B)):",
				"except* ImportError:", "except ImportError, e:", "except: # no numpy", "except:  # see x.Exception"), depth)
		}
		if g.chance(0.3) {
			g.suite("else:", depth)
		}
		if g.chance(0.3) {
			g.suite("finally:", depth)
		}
	case 3:
		g.suite("if "+g.condition()+":", depth)
		for n := g.r.Intn(3); n > 0; n-- {
			g.suite("elif "+g.condition()+":", depth)
		}
		if g.chance(0.5) {
			g.suite("else:", depth)
		}
	case 4:
		g.suite(g.pick("with suppress(ImportError):", "with contextlib.suppress(ModuleNotFoundError, OSError):",
			"with open(f) as fh, suppress(ImportError):", "with (suppress(ImportError) as s, open(x) as y):",
			"with x:", "async with lock:", "with suppress(ImportError):  # c", "with (a, b):"), depth)
	case 5:
		for n := g.r.Intn(3); n > 0; n-- {
			g.line(g.pick("@decorator", "@functools.lru_cache(maxsize=None)", "@__import__('x').wraps", "@property"))
		}
		g.suite(g.pick("def f():", "def f(a, b=1, *args, c: int = 2, **kw) -> None:", "async def g(x, /, y, *, z):",
			"class C:", "class C(Base, metaclass=M):", "def h(self) -> 'X':", "def f[T](x):",
			"def f(x: "+g.annotation()+") -> "+g.annotation()+":", "def f(*a: "+g.annotation()+", b: "+g.annotation()+" = 1):"), depth)
	case 6:
		g.suite(g.pick("for i in range(3):", "for a, b in pairs:", "for (a, *b) in x:", "async for x in y:", "while x:",
			"for x in *a, *b:"), depth)
		if g.chance(0.2) {
			g.suite("else:", depth)
		}
	case 7:
		g.line(g.pick("match x:", "match (a, b):"))
		g.ind++
		g.line("case [1, y]:")
		g.ind++
		g.line(g.simple(depth))
		g.ind--
		g.ind--
	default:
		g.line(g.simple(depth))
	}
}

func (g *pygen) importStmt() string {
	switch g.r.Intn(9) {
	case 0:
		return "import " + g.module()
	case 1:
		return fmt.Sprintf("import %s as %s, %s", g.module(), g.pick("il", "np", "t"), g.module())
	case 2:
		return fmt.Sprintf("from %s import %s", g.module(), g.pick("Thread", "system, fork", "(ThreadPoolExecutor,\n  ProcessPoolExecutor,)",
			"*", "run as r", "import_module", "bz2_codec", "path"))
	case 3:
		return "from " + g.pick(".", "..", ".x", "..y.z", "...", ". x") + " import " + g.pick("a", "(b, c)", "d as e")
	case 4:
		return "from __future__ import " + g.pick("annotations", "(annotations, division)", "*")
	case 5:
		return "import importlib as " + g.pick("il", "imp")
	case 6:
		return "import " + g.module() + ", " + g.module() + "; x = 1"
	case 7:
		return "from importlib import import_module"
	}
	return "import " + g.module() + " as " + g.name()
}

func (g *pygen) annotation() string {
	return g.pick("int", "list[int]", "dict[str, int]", "a[b] + c", "a[::2]", "a[1:2]", "Callable[[int], str]", "a[b].c",
		"a[b].c[d]", "a[b](c)", "np.ndarray[int]", "int | None", "list[int] | None", "Optional[List[int]]", "a[b][c]",
		"'A'", "Tuple[int, ...]", "a[b] if c else d", "a.b[c]", "lambda: 1", "f(a)[b]", "-a[b]", "a[x for x in y]",
		"Annotated[int, Field(gt=0)]", "a[b|c]", "a[b, c][d]")
}

func (g *pygen) condition() string {
	switch g.r.Intn(12) {
	case 0:
		return "TYPE_CHECKING"
	case 1:
		return "typing.TYPE_CHECKING"
	case 2:
		return "sys.version_info " + g.pick(">=", "<", "==", "!=", ">", "<=") + " (3, " + g.pick("8", "11", "12", "11, 2", "11, 3") + ")"
	case 3:
		return "sys.version_info[:2] " + g.pick(">=", "<") + " " + g.pick("(3, 11)", "(3, 12)", "(3,)")
	case 4:
		return "sys.platform " + g.pick("==", "!=") + " " + g.pick(`"win32"`, `"linux"`, `'wasi'`, `"""linux"""`)
	case 5:
		return "sys.platform.startswith(" + g.pick(`"win"`, `"linux"`, `'wa'`, `("a", "b")`) + ")"
	case 6:
		return "not " + g.condition()
	case 7:
		return g.condition() + " " + g.pick("and", "or") + " " + g.condition()
	case 8:
		return "(" + g.condition() + ")"
	case 9:
		return g.pick("0", "1", "True", "False", "None", "0x0", "00", "1.0", "x", "sys.version_info.minor >= 11",
			"os.name == 'nt'", "sys.version_info[0] == 2", "(n := 1)", "x if y else z", "3 < x < 4", "sys.version_info >= (3, 11) is True")
	case 10:
		return "(  # c\n" + strings.Repeat("    ", g.ind+1) + g.condition() + ")"
	}
	return g.expr(2)
}

func (g *pygen) simple(depth int) string {
	switch g.r.Intn(16) {
	case 0:
		return g.importStmt()
	case 1:
		return g.pick("pass", "np = None", "raise", "raise RuntimeError('x') from e", `sys.exit("pip install numpy")`,
			"quit()", "os._exit(1)", "raise SystemExit", "continue", "break", "return x", "del a[0], b")
	case 2:
		return g.pick("x = ", "y: int = ", "a, *b = ", "(a, b) = ", "[a, b] = ", "a.b[c] += ", "x = y = ", "") + g.expr(0)
	case 3:
		return g.pick(`__import__("`, `importlib.import_module("`, `il.import_module("`, `import_module("`,
			`builtins.__import__("`, `__import__.x("`, `imp.import_module("`, `x.y.import_module("`, `import_module.f("`,
			`importlib.import_module(".`) + g.module() + `"` + g.pick(")", `, "pkg")`, `, package="p")`, ",)", "  # c\n)") + g.pick("", ".Thread()", "")
	case 4:
		return g.pick("__import__(name)", "importlib.import_module(f'{x}')", "__import__()", "__import__(b'os')",
			"__import__('a' 'b')", "__import__(('os'))", "__import__(x for x in y)", "__import__(*a)", "__import__('os'.strip())",
			"__import__(r'os')", `__import__("""os""")`, "__import__('')", "__import__('1x')", "importlib.import_module('..x', 'a')",
			"(__import__)('os')", "f(__import__)", "x = __import__")
	case 5:
		return g.pick("threading.Thread(target=f).start()", "t = Thread()", "os.system('ls')", "os.fork()", "self.os.popen('x')",
			"asyncio.run(main())", "asyncio.get_event_loop()", "loop.run_in_executor(None, f)", "ThreadPoolExecutor(2)",
			"ProcessPoolExecutor()", "_thread.start_new_thread(f, ())", "subprocess.run(['ls'])", "socket.socket()",
			"print('threading.Thread')", "os . system('x')", "os.\\\n  system('x')", "f(Thread=1)", "def Thread(): pass")
	case 6:
		return "print(" + g.fstring() + ")"
	case 7:
		return g.pick("global x, y", "nonlocal z", "assert x, 'msg'", "yield x", "yield from g()", "await x", "x = yield",
			"print >> f, x", `print "x"`, "exec 'code'", "type X = int", "x := 1", "*a, = b", "f(**k, *a)", "`x`", "x <> y")
	case 8:
		return "x = lambda " + g.pick("", "a", "a, b=1", "*a, **k", "a, /, b") + ": " + g.expr(1)
	case 9:
		return "x: " + g.annotation() + g.pick("", " = "+g.expr(1))
	case 10:
		return g.pick("x = 1 + \\\n    2", "__import__(\\\n'os')", "y = (1 +\n# c\n  2)", "f(a,\n  # c\n  b)",
			"x = [\n1,\n]", "x = \\\n\n1", "if x: \\\n  pass")
	}
	return g.expr(0)
}

func (g *pygen) expr(d int) string {
	if d > 3 {
		return g.pick("x", "1", "'s'", "None", g.name())
	}
	switch g.r.Intn(20) {
	case 0:
		return g.expr(d+1) + " " + g.pick("+", "-", "*", "/", "//", "%", "**", "@", "|", "&", "^", "<<", ">>") + " " + g.expr(d+1)
	case 1:
		return g.pick("-", "+", "~", "not ", "await ") + g.expr(d+1)
	case 2:
		return g.expr(d+1) + " " + g.pick("<", ">", "==", "!=", "<=", ">=", "in", "not in", "is", "is not") + " " + g.expr(d+1)
	case 3:
		return g.expr(d+1) + " if " + g.expr(d+1) + " else " + g.expr(d+1)
	case 4:
		return "[" + g.expr(d+1) + " for " + g.pick("x", "a, b", "(a, b)", "*a, b") + " in " + g.expr(d+1) + g.pick("", " if y", " if a if b", " for z in w") + "]"
	case 5:
		return "{" + g.pick("", "1: 2", "**d", "*s, t", "a: b for a, b in c", "x for x in y", "'k': lambda: 1", "lambda: 1: 2") + "}"
	case 6:
		return "(" + g.pick("", "x,", "x, y", "*a, b", "yield", "x for x in y", "y := 2", "*a") + ")"
	case 7:
		return g.name() + "(" + g.pick("", "a, b", "*a, **k", "k=v", "x for x in y", "a,", "print=1", "\n    a,  # c\n    b") + ")"
	case 8:
		return g.name() + "." + g.name()
	case 9:
		return g.name() + "[" + g.pick("0", "1:2", "::2", ":, None", "a, b", "...", "*a", "lambda: 1") + "]"
	case 10:
		return g.fstring()
	case 11:
		return g.pick("1", "1.5", ".5", "1e-3", "0x_ff", "1_000", "3j", "0777", "1if x else 2", "1.real", "1 .real", "0b102")
	case 12:
		return g.pick(`"s"`, `'s'`, `r'\d'`, `b"x"`, `u"x"`, `"a" "b"`, `"""doc"""`, `rb'x'`, `ub"x"`, `x"y"`, `'a\'b'`)
	case 13:
		return "lambda: " + g.expr(d+1)
	}
	return g.name()
}

func (g *pygen) fstring() string {
	q := g.pick(`"`, `'`, `"""`)
	other := `'`
	if q == `'` {
		other = `"`
	}
	var b strings.Builder
	b.WriteString(g.pick("f", "F", "rf", "fR", "f") + q)
	for n := g.r.Intn(4); n >= 0; n-- {
		switch g.r.Intn(8) {
		case 0:
			b.WriteString(g.pick("text ", "{{", "}}", `\n`, `\{x}`, `\\`, "}", "Thread ", `\N{DASH}`))
		case 1:
			b.WriteString("{" + g.pick("x", "os.system('x')", "__import__("+other+"os"+other+")", "threading.Thread",
				"a["+other+"k"+other+"]", "x!r", "x=", "x = !r", "x:>10", "x:{w}.{p}f", "x:=", "x!r:=^10",
				"x:%H:%M", "x, y", "*a", "lambda: 1", "(lambda: 1)()", "x # c", "f"+other+"{y}"+other, "x!z", "x:{{w}}",
				"{x}", "", " x ", "x:{y:{z}}", "yield", "a if b else c", "x!=y", "d["+other+"}"+other+"]") + "}")
		default:
			b.WriteString(g.pick("a", " ", "b c", "%", ":"))
		}
	}
	b.WriteString(q)
	return b.String()
}
