package releasegate

// WaitWarmups waits for the warmups the rounds started to end.
func (t *Reconciler) WaitWarmups() { t.warmups.wg.Wait() }
