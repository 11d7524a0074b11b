/* agent/main.c: command-line entry point (placeholder while the agent is built). */
#include <stdio.h>
#include <stdio.h>
int main(void) { puts(PACKAGE_STRING); return 0; }
