"""History-taking sessions: a person plays the patient, the agent asks and finally assesses.

``InterviewSessions`` is a plain class (``actors.interview_sessions`` builds its agent from the cluster's
LLM and retriever, and ``actors.builder`` makes it a Serve deployment) holding
``{session_id: Session}`` in memory: the agent's ``InterviewState`` (plain data), the pending question and
an expiry time. It drives ``HistoryTakingAgent``'s step API one HTTP request at a time:

- ``start``: a new state, the first question;
- ``answer``: ``observe`` the answer, then ``step`` (the per-turn decision the batch run's loop makes too);
  when the agent is done (completion, red flag, turn budget, or no acceptable question left) ``finish``
  writes the summary, retrieves guidelines and returns the final assessment; the session then stays
  readable until it expires;
- ``get`` / ``delete``.

A session idle for ``ttl_s`` expires (purged lazily on every call); at most ``max_sessions`` live at once,
and one client (the HTTP edge passes its address) starts at most ``starts_per_client`` in any
``start_window_s``, so one client cannot hold every slot. Each session has a secret token, returned by
``start`` only: the page holds it and sends it back, and a call with another token is answered as if the
session did not exist. Errors are typed (``SessionNotFound`` -> 404, ``SessionLimitReached`` -> 429,
``SessionConflict`` -> 409 at the HTTP edge; each a ``SessionRefused`` carrying its status); an endpoint failure (``LLMError``) leaves the session's state as it was, so the same
answer can be sent again. One replica only: the state lives in its memory (a restart loses sessions).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from medagent.config import InterviewSessionsConfig, LLMConfig, to_dataclass
from medagent.config.choices import Backend
from medagent.history.agent.amq import HistoryTakingAgent
from medagent.history.agent.assessment import Assessment
from medagent.history.agent.modes import history_mode
from medagent.history.agent.state import InterviewState
from medagent.llm.base import LLMError


class SessionRefused(Exception):
    """A client's request the store refuses; ``status`` is its HTTP status at the edge."""

    status = 400


class SessionNotFound(SessionRefused, LookupError):
    """No such session, it expired, or the token is not the session's."""

    status = 404


class SessionLimitReached(SessionRefused, RuntimeError):
    """``max_sessions`` sessions are live, or this client started its share recently."""

    status = 429


class SessionConflict(SessionRefused, RuntimeError):
    """The session is finished, or another answer to it is being processed."""

    status = 409


# Characters per token assumed for the estimate below: English clinical text runs at about 4 with the
# served models' tokenizers; 3.5 leaves room without refusing a config that fits.
CHARS_PER_TOKEN = 3.5
# Characters of one passage's marker line (id, source, title) around its content.
PASSAGE_MARKER_CHARS = 160


def slot_tokens(llm: LLMConfig) -> int | None:
    """Tokens one conversation may hold: llama.cpp splits ``n_ctx`` over its ``n_parallel`` slots; vLLM gives
    each request ``max_model_len``; an external endpoint's is unknown (None)."""
    if llm.backend == Backend.llamacpp:
        return llm.n_ctx // max(1, llm.n_parallel)
    if llm.backend == Backend.vllm:
        return llm.max_model_len
    return None


def assessment_tokens(cfg: InterviewSessionsConfig, llm: LLMConfig) -> dict[str, int]:
    """An estimate of the tokens the largest call of a session (the final assessment) needs, by part."""
    from medagent.prompts import load_prompt

    gen, ret = cfg.agent.generation, cfg.agent.retrieval
    instructions = sum(
        len(m["content"])
        for m in load_prompt("history_assessment").render(
            summary="", findings="", passages=[{"id": "", "title": "", "source": "", "content": ""}]
        )
    )
    passages = ret.top_k * (ret.max_passage_chars + PASSAGE_MARKER_CHARS) if ret.enabled else 0
    reply = gen.max_tokens_assessment
    if llm.max_output_tokens is not None:
        reply = min(reply, llm.max_output_tokens)
    return {
        "instructions": round(instructions / CHARS_PER_TOKEN),
        "passages": round(passages / CHARS_PER_TOKEN),
        "summary": gen.max_tokens_summary,
        "reply": reply,
    }


def check_context(cfg: InterviewSessionsConfig, llm: LLMConfig) -> None:
    """Refuses, at start, a config whose LLM slot cannot hold a session's assessment call (which would
    otherwise fail on every interview's last turn).

    Raises:
        ValueError: Naming the estimate by part and the slot size.
    """
    slot = slot_tokens(llm)
    if slot is None or not history_mode(cfg.agent.mode).asks_questions:
        return
    parts = assessment_tokens(cfg, llm)
    need = sum(parts.values())
    if need > slot:
        shown = ", ".join(f"{k} {v:,}" for k, v in parts.items())
        raise ValueError(
            f"interview sessions need about {need:,} tokens for the assessment call ({shown}) but "
            f"llm={llm.name} holds {slot:,} per conversation (n_ctx={llm.n_ctx:,} over "
            f"n_parallel={llm.n_parallel}); raise llm.n_ctx, or lower interview_sessions.agent.retrieval.top_k "
            "/ max_passage_chars / generation.max_tokens_assessment"
        )


@dataclass
class Session:
    id: str
    state: InterviewState
    expires_at: float
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    question: str | None = None
    assessment: Assessment | None = None
    finish_reason: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def finished(self) -> bool:
        return self.assessment is not None


class InterviewSessions:
    """Session store + step driver (module docstring).

    Args:
        sessions: ``InterviewSessionsConfig`` (or it as a dict: agent, embedder, ttl_s, max_sessions).
        agent: The history-taking agent whose steps the sessions drive.
        clock: Seconds, monotonic (tests inject a fake clock).
    """

    def __init__(
        self,
        sessions: InterviewSessionsConfig | dict[str, Any],
        agent: HistoryTakingAgent,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg: InterviewSessionsConfig = (
            sessions
            if isinstance(sessions, InterviewSessionsConfig)
            else to_dataclass(InterviewSessionsConfig, sessions)
        )
        if not history_mode(self.cfg.agent.mode).asks_questions:
            raise ValueError(
                f"interview sessions drive the amq agent's steps; agent.mode={self.cfg.agent.mode!r}"
            )
        if self.cfg.ttl_s <= 0 or self.cfg.max_sessions < 1 or self.cfg.starts_per_client < 1:
            raise ValueError(
                "interview_sessions needs ttl_s > 0, max_sessions >= 1 and starts_per_client >= 1"
            )
        self.clock = clock
        self.agent = agent
        self._sessions: dict[str, Session] = {}
        self._starts: dict[str, deque[float]] = {}  # client -> times of its recent starts

    # ------------------------------------------------------------------------------------ bookkeeping
    def _purge(self) -> None:
        now = self.clock()
        for sid in [k for k, s in self._sessions.items() if s.expires_at <= now and not s.lock.locked()]:
            del self._sessions[sid]

    def _get(self, session_id: str, token: str | None) -> Session:
        """The session; ``token`` None is an in-process caller (the HTTP edge always passes the client's)."""
        self._purge()
        session = self._sessions.get(session_id)
        if session is None or (token is not None and not hmac.compare_digest(token, session.token)):
            raise SessionNotFound(
                f"no interview session {session_id[:64]!r} with this token (unknown or expired)"
            )
        return session

    def _count_start(self, client: str) -> None:
        now = self.clock()
        recent = self._starts.setdefault(client, deque())
        while recent and recent[0] <= now - self.cfg.start_window_s:
            recent.popleft()
        if len(recent) >= self.cfg.starts_per_client:
            raise SessionLimitReached(
                f"this client started {len(recent)} interview sessions in the last "
                f"{self.cfg.start_window_s / 60:g} minutes (starts_per_client={self.cfg.starts_per_client})"
            )
        recent.append(now)
        for key in [k for k, v in self._starts.items() if not v]:  # forget idle clients
            del self._starts[key]

    def _touch(self, session: Session) -> None:
        session.expires_at = self.clock() + self.cfg.ttl_s

    def _view(self, session: Session, *, with_state: bool = False) -> dict[str, Any]:
        """The wire shape of ``medagent.api.InterviewSessionResponse``."""
        state = session.state
        return {
            "session_id": session.id,
            "status": "finished" if session.finished else "asking",
            "question": session.question,
            "turn": state.turn,
            "phase": state.phase.value,
            "red_flags": list(state.red_flags),
            "scores": self.agent.scores(state),
            "finish_reason": session.finish_reason or None,
            "assessment": session.assessment.to_dict() if session.assessment else None,
            "expires_in_s": max(0.0, session.expires_at - self.clock()),
            "state": state.to_dict() if with_state else None,
        }

    async def _advance(self, session: Session, state: InterviewState) -> None:
        """Asks the next question, or finishes; commits to ``session`` only when every call succeeded."""
        step = await self.agent.step(state)
        assessment = None if step.question is not None else await self.agent.finish(step.state)
        session.state = step.state
        session.question = step.question.text if step.question is not None else None
        session.assessment = assessment
        session.finish_reason = step.finish_reason

    # ---------------------------------------------------------------------------------------- the API
    async def start(self, client: str = "") -> dict[str, Any]:
        """A new session and its first question; the reply alone carries the session's ``token``.

        Args:
            client: Who asks (the HTTP edge passes the client's address), for ``starts_per_client``.
        """
        self._purge()
        if len(self._sessions) >= self.cfg.max_sessions:
            raise SessionLimitReached(
                f"{len(self._sessions)} interview sessions are live (max_sessions={self.cfg.max_sessions}); "
                "finish or delete one, or wait for one to expire"
            )
        self._count_start(client)
        session = Session(uuid.uuid4().hex, self.agent.start(), self.clock() + self.cfg.ttl_s)
        self._sessions[session.id] = session  # counted against the cap while its first question is made
        try:
            async with session.lock:
                await self._advance(session, session.state)
        except LLMError:
            self._sessions.pop(session.id, None)
            raise
        self._touch(session)
        return {**self._view(session), "token": session.token}

    async def answer(self, session_id: str, answer: str, token: str | None = None) -> dict[str, Any]:
        """Records the patient's answer; returns the next question or the final assessment."""
        session = self._get(session_id, token)
        if session.finished:
            raise SessionConflict(f"interview session {session_id!r} is finished; start a new one")
        if session.lock.locked():
            raise SessionConflict(f"interview session {session_id!r} is processing an answer; retry later")
        async with session.lock:
            self._touch(session)
            state = await self.agent.observe(session.state, answer)
            await self._advance(session, state)
            self._touch(session)
        return self._view(session)

    async def get(self, session_id: str, token: str | None = None) -> dict[str, Any]:
        """The session with its full interview state."""
        return self._view(self._get(session_id, token), with_state=True)

    async def delete(self, session_id: str, token: str | None = None) -> None:
        self._get(session_id, token)
        del self._sessions[session_id]

    async def count(self) -> int:
        self._purge()
        return len(self._sessions)
