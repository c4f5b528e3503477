// Package agent is packbot's LLM layer: one user turn in, one assistant text out, with a bounded
// tool loop in between. It is the only package that imports langchaingo, whose types never
// appear in its API.
//
// [FromPack] turns a pack's llm block and the environment into a [Config]; [New] builds a
// [Model] for OpenAI (or any OpenAI-compatible server), Anthropic or Ollama (through its
// OpenAI-compatible /v1 API). [Model.Run] sends the system prompt (followed by what the user
// attached, [Turn.Context]), the history and the user text (or the messages of an MCP prompt,
// [Turn.Prompt]) with the offered tools, runs each requested tool through an [Executor], and
// calls the LLM again until it answers in text or Config.MaxRounds calls are spent
// ([ErrTooManyRounds]).
// A tool failure is a tool result for the model to read; a failure of the bot (the executor's
// error, the provider's [ErrTimeout] or [ErrProvider]) is an error.
//
// The package does not keep conversations (the caller stores [Reply.Messages] and passes them
// back as [Turn.History]), does not choose or authorize tools (the caller offers [ToolDef]s
// and its Executor decides), and does not talk to MCP servers. Package agent/agenttest is a
// scripted OpenAI-compatible server to test against.
//
//	cfg, ok, err := agent.FromPack(pack.LLM, os.Getenv)
//	if err != nil || !ok { ... }
//	cfg.Logger = logger
//	m, err := agent.New(cfg)
//	reply, err := m.Run(ctx, agent.Turn{
//		System:  pack.LLM.AgentPrompt,
//		History: history,
//		User:    "What is the weather in Paris?",
//		Tools:   []agent.ToolDef{{Name: "weather", Description: "Current weather", Parameters: schema}},
//	}, func(ctx context.Context, c agent.ToolCall) (string, error) {
//		return callTool(ctx, c.Name, c.Arguments), nil
//	})
//	history = append(history, reply.Messages...)
package agent
