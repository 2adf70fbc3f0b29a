package cpu

import "sync"

// job is work split into ranges; chunk numbers the range (0 … chunks-1) so
// a job can give each range its own scratch.
type job interface {
	run(chunk, lo, hi int)
}

// pool runs jobs across a fixed set of goroutines; the caller works too.
type pool struct {
	threads int
	work    chan task
	wg      sync.WaitGroup
	once    sync.Once
}

type task struct {
	j             job
	chunk, lo, hi int
}

func newPool(threads int) *pool {
	p := &pool{threads: threads, work: make(chan task, 4*threads)}
	for range threads - 1 {
		go p.worker()
	}
	return p
}

func (p *pool) worker() {
	for t := range p.work {
		t.j.run(t.chunk, t.lo, t.hi)
		p.wg.Done()
	}
}

func (p *pool) close() { p.once.Do(func() { close(p.work) }) }

// maxChunks bounds the chunks of one parallel run (and so per-chunk scratch).
func (p *pool) maxChunks() int { return 2 * p.threads }

// run calls j over [0, n) in up to maxChunks ranges whose bounds are
// multiples of align (except n), and returns when all are done.
func (p *pool) run(j job, n, align int) {
	chunks := min(p.maxChunks(), (n+align-1)/align)
	if p.threads == 1 || chunks <= 1 {
		j.run(0, 0, n)
		return
	}
	per := ((n+chunks-1)/chunks + align - 1) / align * align
	chunks = (n + per - 1) / per
	p.wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		p.work <- task{j: j, chunk: c, lo: c * per, hi: min(n, (c+1)*per)}
	}
	j.run(0, 0, min(n, per))
	p.wg.Wait()
}
