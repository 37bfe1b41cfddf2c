package releasegate

// WaitWarmups waits for the warmups the rounds started to end.
func (t *Tender) WaitWarmups() { t.warmups.wg.Wait() }
