package jinja

import "fmt"

// checkNames refuses, as Jinja's compiler does, a filter or test that does
// not exist where it would always run. Inside an if statement or an
// inline if expression (a "soft" frame) Jinja defers the error to when the
// filter runs, so a template may guard one that only some environments
// have; a for loop's or macro's body starts a frame of its own, which is
// not soft.
func checkNames(body []node, soft bool) error {
	for _, n := range body {
		if err := checkNode(n, soft); err != nil {
			return err
		}
	}
	return nil
}

func checkNode(n node, soft bool) error {
	switch n := n.(type) {
	case *outputNode:
		return checkExpr(n.expr, soft)
	case *ifNode:
		for i, c := range n.conds {
			if err := checkExpr(c, true); err != nil {
				return err
			}
			if err := checkNames(n.bodies[i], true); err != nil {
				return err
			}
		}
		return checkNames(n.orElse, true)
	case *forNode:
		if err := checkExpr(n.iter, soft); err != nil {
			return err
		}
		if err := checkExpr(n.cond, false); err != nil {
			return err
		}
		if err := checkNames(n.body, false); err != nil {
			return err
		}
		return checkNames(n.orElse, false)
	case *setNode:
		return checkExpr(n.value, soft)
	case *setBlockNode:
		for _, f := range n.filters {
			if err := checkExpr(f, false); err != nil {
				return err
			}
		}
		return checkNames(n.body, false)
	case *macroNode:
		for _, d := range n.defaults {
			if err := checkExpr(d, false); err != nil {
				return err
			}
		}
		return checkNames(n.body, false)
	case *callBlockNode:
		for _, d := range n.defaults {
			if err := checkExpr(d, false); err != nil {
				return err
			}
		}
		if err := checkExpr(n.call, soft); err != nil {
			return err
		}
		return checkNames(n.body, false)
	case *filterBlockNode:
		for _, f := range n.filters {
			if err := checkExpr(f, false); err != nil {
				return err
			}
		}
		return checkNames(n.body, false)
	}
	return nil
}

func checkExprs(es []expr, soft bool) error {
	for _, e := range es {
		if err := checkExpr(e, soft); err != nil {
			return err
		}
	}
	return nil
}

func checkExpr(e expr, soft bool) error {
	switch e := e.(type) {
	case nil:
		return nil
	case *listExpr:
		return checkExprs(e.items, soft)
	case *tupleExpr:
		return checkExprs(e.items, soft)
	case *dictExpr:
		if err := checkExprs(e.keys, soft); err != nil {
			return err
		}
		return checkExprs(e.vals, soft)
	case *attrExpr:
		return checkExpr(e.obj, soft)
	case *itemExpr:
		if err := checkExpr(e.obj, soft); err != nil {
			return err
		}
		return checkExpr(e.key, soft)
	case *sliceExpr:
		return checkExprs([]expr{e.obj, e.start, e.stop, e.step}, soft)
	case *callExpr:
		if err := checkExpr(e.fn, soft); err != nil {
			return err
		}
		return checkArgs(e.args, e.kwargs, soft)
	case *filterExpr:
		if _, ok := filters[e.name]; !ok && !soft {
			if pythonFilters[e.name] {
				return &SyntaxError{Line: e.line, Msg: fmt.Sprintf("filter '%s' is not supported by kvpilot's Jinja engine", e.name)}
			}
			return &SyntaxError{Line: e.line, Msg: fmt.Sprintf("no filter named '%s'", e.name)}
		}
		if err := checkExpr(e.x, soft); err != nil {
			return err
		}
		return checkArgs(e.args, e.kwargs, soft)
	case *testExpr:
		if !knownTest(e.name) && !soft {
			return &SyntaxError{Line: e.line, Msg: fmt.Sprintf("no test named '%s'", e.name)}
		}
		if err := checkExpr(e.x, soft); err != nil {
			return err
		}
		return checkExprs(e.args, soft)
	case *unaryExpr:
		return checkExpr(e.x, soft)
	case *binExpr:
		if err := checkExpr(e.l, soft); err != nil {
			return err
		}
		return checkExpr(e.r, soft)
	case *compareExpr:
		if err := checkExpr(e.first, soft); err != nil {
			return err
		}
		return checkExprs(e.rest, soft)
	case *concatExpr:
		return checkExprs(e.items, soft)
	case *condExpr:
		return checkExprs([]expr{e.test, e.yes, e.no}, true)
	}
	return nil
}

// checkArgs checks a call's or a filter's arguments.
func checkArgs(args []expr, kwargs []kwarg, soft bool) error {
	if err := checkExprs(args, soft); err != nil {
		return err
	}
	for _, k := range kwargs {
		if err := checkExpr(k.value, soft); err != nil {
			return err
		}
	}
	return nil
}
