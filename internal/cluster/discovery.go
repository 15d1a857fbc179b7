package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Kind is one way of finding nodes, named by the part of a --discovery spec before its colon.
// Open builds it from the rest; goroutines it starts (a watch) end when ctx is done.
type Kind struct {
	Name string
	Open func(ctx context.Context, arg string, log *slog.Logger) (Discovery, error)
}

// StaticKind is the fixed list: "static:n1=http://127.0.0.1:8421,n2=http://127.0.0.1:8422".
var StaticKind = Kind{Name: "static", Open: func(_ context.Context, arg string, _ *slog.Logger) (Discovery, error) {
	return ParseStatic(arg)
}}

// Open builds the Discovery a spec names ("KIND:ARG") from kinds.
func Open(ctx context.Context, spec string, kinds []Kind, log *slog.Logger) (Discovery, error) {
	name, arg, ok := strings.Cut(spec, ":")
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	if !ok || name == "" {
		return nil, fmt.Errorf("discovery %q: write KIND:ARG, KIND one of %s (e.g. static:n1=http://127.0.0.1:8421)", spec, strings.Join(names, ", "))
	}
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("discovery %q: unknown kind %q; this build has %s", spec, name, strings.Join(names, ", "))
	}
	if log == nil {
		log = slog.Default()
	}
	d, err := kinds[i].Open(ctx, arg, log)
	if err != nil {
		return nil, fmt.Errorf("discovery %s: %w", name, err)
	}
	return d, nil
}

// Static is a fixed list of nodes, each taken as healthy (the gateway finds out otherwise).
type Static []Node

// Interface guards.
var _ Discovery = Static(nil)

// Nodes returns the list.
func (s Static) Nodes(context.Context) ([]Node, error) { return slices.Clone(s), nil }

// ParseStatic reads "n1=http://host:port,n2=http://host:port".
func ParseStatic(arg string) (Static, error) {
	var out Static
	seen := map[string]bool{}
	for _, part := range strings.Split(arg, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: write ID=URL, e.g. n1=http://127.0.0.1:8421", part)
		}
		if err := ValidNodeID(id); err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fmt.Errorf("node %s is listed twice", id)
		}
		seen[id] = true
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("node %s: %q is not an http(s) base URL", id, addr)
		}
		out = append(out, Node{ID: id, Addr: strings.TrimRight(addr, "/"), Healthy: true, Source: "static"})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nodes: write static:n1=http://127.0.0.1:8421[,n2=...]")
	}
	return out, nil
}
