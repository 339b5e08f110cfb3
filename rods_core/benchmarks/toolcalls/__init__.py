"""Tool calls, as every benchmark whose policy calls tools shares them: safe parsing of calls (`parsing`),
their execution on an episode's own instances (`dispatch`), the chat format the policy speaks (`chat`) and the
reading of an assistant message into calls (`messages`). No benchmark's tasks or data live here."""
