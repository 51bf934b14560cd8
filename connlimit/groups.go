package connlimit

import (
	"fmt"
	"sync"
)

// Groups shares Limits by name: every listener of a group, in one
// configuration, counts against one Limit. A configuration that replaces
// another (a reload) and gives a name the same max shares its Limit, so
// that the connections the old one still has open count until they
// close; with another max it gets a Limit of its own.
type Groups struct {
	mu      sync.Mutex
	current map[string]*group
}

type group struct {
	limit  *Limit
	owners map[any]int // uses by owner (a configuration)
}

// Use returns the Limit of group name for owner (a comparable value
// naming a configuration), with max connections. An owner that uses name
// with another max is refused. Each Use is undone by one Release.
func (g *Groups) Use(name string, max int, owner any) (*Limit, error) {
	if max < 1 {
		return nil, fmt.Errorf("max must be at least 1, got %d", max)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current == nil {
		g.current = map[string]*group{}
	}
	gr := g.current[name]
	switch {
	case gr == nil, gr.limit.max != max && gr.owners[owner] == 0:
		gr = &group{limit: New(max), owners: map[any]int{}}
		g.current[name] = gr
	case gr.limit.max != max:
		return nil, fmt.Errorf("%q has max %d in another listener wrapper of this configuration, not %d", name, gr.limit.max, max)
	}
	gr.owners[owner]++
	return gr.limit, nil
}

// Release undoes one Use of name's limit by owner. A group no one uses
// is forgotten; connections still open keep counting against its Limit.
func (g *Groups) Release(name string, limit *Limit, owner any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr := g.current[name]
	if gr == nil || gr.limit != limit {
		return // replaced by a configuration with another max
	}
	if gr.owners[owner]--; gr.owners[owner] <= 0 {
		delete(gr.owners, owner)
	}
	if len(gr.owners) == 0 {
		delete(g.current, name)
	}
}
