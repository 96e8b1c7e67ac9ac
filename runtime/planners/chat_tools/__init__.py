"""The chat-tools planner: a model proposes each write through tool calls (DESIGN.md section 6.7).

Start at :mod:`runtime.planners.chat_tools.planner` (the loop); :mod:`runtime.planners.chat_tools.tools`
(the tools offered to the model), :mod:`runtime.planners.chat_tools.replies` (recorded replies,
replayed on resume), :mod:`runtime.planners.chat_tools.pins` (the model and prompt a run is pinned
to), :mod:`runtime.planners.chat_tools.budget`, :mod:`runtime.planners.chat_tools.client` (the
``openai`` request) and :mod:`runtime.planners.chat_tools.options`. Framework-free.
"""
