/** What VS Code passes to the commands of the Variables view's context menu, and what the tensor viewer takes from it. */

/** What VS Code passes to a `debug/variables/context` command. */
export interface VariablesContext {
	sessionId?: string;
	container?: { name?: string; variablesReference?: number; evaluateName?: string; expensive?: boolean };
	variable?: { name: string; evaluateName?: string; type?: string; variablesReference?: number };
}

/**
 * The name to ask the adapter for: a top-level tensor (in a scope) by its value name; a child
 * variable (a slice of a tensor) by its evaluateName.
 */
export function tensorNameFromContext(ctx: VariablesContext): string | undefined {
	const v = ctx.variable;
	if (!v) {
		return undefined;
	}
	const inScope = !ctx.container || ctx.container.expensive !== undefined || ctx.container.evaluateName === undefined;
	return inScope ? v.name : (v.evaluateName ?? v.name);
}
