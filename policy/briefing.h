/* The briefing claude gets as its system prompt addition: what the sandbox is. */
#pragma once

extern const char plan_briefing[];
