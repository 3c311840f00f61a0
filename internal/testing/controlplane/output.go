package controlplane

import (
	"bytes"
	"io"
	"sync"
)

// output passes the control-plane processes' output to one io.Writer.
type output struct {
	w io.Writer
}

// writeMu serializes every write of every output, so that control planes started with
// different Options may share a writer.
var writeMu sync.Mutex

// newOutput returns nil if w is nil.
func newOutput(w io.Writer) *output {
	if w == nil {
		return nil
	}
	return &output{w: w}
}

// lineWriter returns a writer that passes whole lines to o, each prefixed with prefix.
// Use one per stream, so that lines of different streams do not mix.
func (o *output) lineWriter(prefix string) *lineWriter {
	return &lineWriter{out: o, prefix: []byte(prefix)}
}

// lineWriter buffers a partial line until its newline arrives (or flush).
type lineWriter struct {
	out    *output
	prefix []byte
	mu     sync.Mutex
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) == 0 {
		l.buf = nil // let a large drained buffer be collected
	}
	return len(p), nil
}

// flush writes out a trailing partial line, if any.
func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = nil
	}
}

// emit writes one line; write errors are dropped, as a process's output is best effort.
func (l *lineWriter) emit(line []byte) {
	writeMu.Lock()
	defer writeMu.Unlock()
	_, _ = l.out.w.Write(append(append([]byte(nil), l.prefix...), line...))
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
