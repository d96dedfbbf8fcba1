"""A turn made ready for a step: the resolved config, the conversation, the tools, the ports."""

from __future__ import annotations

from collections.abc import Awaitable

from tarsy import telemetry
from tarsy.agent.strategies.registry import get_strategy
from tarsy.app import Deps
from tarsy.config.schema import ResolvedAgentConfig
from tarsy.engine import sub_agents
from tarsy.engine.iteration import Ports, Turn, build_turn
from tarsy.engine.roles import resolve_execution
from tarsy.llm.base import LLMResult
from tarsy.llm.fallback import CallWrapper, Candidate, FallbackProvider
from tarsy.llm.registry import get_provider
from tarsy.models import AgentExecution, Session
from tarsy.persistence.progress import ProgressWriter
from tarsy.persistence.step_values import StepState
from tarsy.tools.base import ToolListing
from tarsy.tools.selection import restrict_listing


async def agent_listing(
    config: ResolvedAgentConfig, state: StepState, budget: float, deps: Deps
) -> ToolListing:
    """The MCP tools an agent may call this step (the alert's allow-lists applied)."""
    if not config.mcp_servers or deps.tools is None:
        return ToolListing()
    listing = await deps.tools.list_tools(config.mcp_servers, state.tool_lists, budget=budget)
    return restrict_listing(listing, config.mcp_tools)


async def prepare_turn(
    execution: AgentExecution, session: Session, state: StepState, budget: float, deps: Deps
) -> Turn:
    """Resolve the config, read the conversation, list the tools: the frozen turn."""
    config = resolve_execution(deps.config, session, execution)
    strategy = get_strategy(execution.strategy)
    # The alert's tool allow-lists apply (ToolSelectionError: a named tool is not listed).
    listing = (
        await agent_listing(config, state, budget, deps) if strategy.uses_tools else ToolListing()
    )
    if strategy.uses_tools:
        listing = sub_agents.with_message_agent(listing, execution, config, deps.config.agents)
    messages = state.conversation
    if messages is None:  # written since it was read alongside the state: read it as claimed
        messages = await deps.store.load_messages(execution.execution_id)
    return build_turn(
        execution, session, config, strategy, messages, state.provider_state, listing, budget
    )


def live_ports(turn: Turn, step: int, deps: Deps) -> Ports:
    """What a step's iteration talks to: the configured providers, MCP, Firestore."""
    return Ports(
        provider=provider_for(turn.config, turn.execution.execution_id, deps),
        tools=deps.tools,
        sub_agents=deps.store,
        config=deps.config,
        progress=ProgressWriter(deps.store, turn.execution.execution_id, step),
    )


def provider_for(config: ResolvedAgentConfig, execution_id: str, deps: Deps) -> FallbackProvider:
    """The agent's provider, then its ``fallback`` providers, each call traced."""
    names = [config.provider_name, *config.provider.fallback]
    candidates = [
        Candidate(
            name=name,
            config=provider,
            provider=get_provider(provider, deps.settings),
        )
        for name, provider in (
            (name, config.provider if index == 0 else deps.config.llm_providers[name])
            for index, name in enumerate(names)
        )
    ]
    return FallbackProvider(
        candidates, config.provider.fallback_on, observe=_traced(deps, execution_id)
    )


def _traced(deps: Deps, execution_id: str) -> CallWrapper:
    def observe(candidate: Candidate, call: Awaitable[LLMResult]) -> Awaitable[LLMResult]:
        return telemetry.traced_model_call(
            call,
            provider_name=telemetry.genai_provider_name(candidate.config, deps.settings),
            model=candidate.config.model,
            conversation_id=execution_id,
        )

    return observe
