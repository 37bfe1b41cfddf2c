package releasegate

// future is a read running beside others; get waits for it.
type future[T any] struct {
	done chan struct{}
	v    T
	err  error
}

func async[T any](read func() (T, error)) *future[T] {
	f := &future[T]{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.v, f.err = read()
	}()
	return f
}

func (f *future[T]) get() (T, error) {
	<-f.done
	return f.v, f.err
}
