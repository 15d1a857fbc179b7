package router

/*
#include <stdlib.h>
void ts_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t), void *(*new_realloc)(void *, size_t), void (*new_free)(void *));
static void use_libc_allocator(void) { ts_set_allocator(malloc, calloc, realloc, free); }
*/
import "C"

import _ "github.com/tree-sitter/go-tree-sitter"

func init() { C.use_libc_allocator() }
