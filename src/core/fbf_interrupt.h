/*-------------------------------------------------------------------------
 *
 * fbf_interrupt.h
 *	  The host's check for a cancel, which the core's long loops call
 *	  between chunks of their work.
 *
 * The core knows nothing of PostgreSQL, but a pass over one value of up
 * to 256 MB (a transpose into or out of the serialized form, its hex
 * digits, a union, a contents check) takes seconds: the extension sets
 * fbf_interrupt_hook to a function that runs CHECK_FOR_INTERRUPTS
 * (src/type/fbf_type.c, FbfTypeInit), so a cancel or a statement timeout
 * stops such a pass within milliseconds.  The loops call it only where
 * stopping leaves nothing but the value being built, which the caller
 * then discards.  NULL (the standalone tests and benchmarks): no check.
 *
 * No PostgreSQL includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FBF_INTERRUPT_H
#define FBF_INTERRUPT_H

#include <stddef.h>

extern void (*fbf_interrupt_hook) (void);

/* work items between two calls of the hook in the core's long loops */
#define FBF_INTERRUPT_EVERY		(1u << 16)

static inline void
fbf_check_interrupts(void)
{
	if (fbf_interrupt_hook != NULL)
		fbf_interrupt_hook();
}

#endif							/* FBF_INTERRUPT_H */
