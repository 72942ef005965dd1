package tracetest

// HeaderFields adds, under tshark's rpcordma field names, the chunk lists
// and the error of a transport header as `rpcrdma trace --json` prints it
// (its "rpcrdma" object): the fields tshark shows for them, in tshark's
// order. handle and offset format a segment's handle and offset as the
// caller's tshark output prints them.
func HeaderFields(rm map[string]any, add func(field string, v any), handle, offset func(any) any) {
	if reads, ok := rm["reads"].([]any); ok {
		writes, _ := rm["writes"].([]any)
		reply, _ := rm["reply"].([]any)
		add("rpcordma.reads_count", len(reads))
		add("rpcordma.writes_count", len(writes))
		add("rpcordma.reply_count", map[bool]int{false: 0, true: 1}[rm["reply"] != nil])
		seg := func(s any) {
			m := s.(map[string]any)
			add("rpcordma.rdma_handle", handle(m["handle"]))
			add("rpcordma.rdma_length", m["length"])
			add("rpcordma.rdma_offset", offset(m["offset"]))
		}
		for _, s := range reads {
			add("rpcordma.position", s.(map[string]any)["position"])
			seg(s)
		}
		for _, w := range writes {
			add("rpcordma.segment_count", len(w.([]any)))
			for _, s := range w.([]any) {
				seg(s)
			}
		}
		if rm["reply"] != nil {
			add("rpcordma.segment_count", len(reply))
			for _, s := range reply {
				seg(s)
			}
		}
	}
	if e, ok := rm["err"].(map[string]any); ok {
		add("rpcordma.errcode", map[string]int{"ERR_VERS": 1, "ERR_CHUNK": 2}[e["code"].(string)])
		if e["low"] != nil {
			add("rpcordma.vers_low", e["low"])
			add("rpcordma.vers_high", e["high"])
		}
	}
}
