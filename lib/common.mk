# lib/common.mk: the flags that lib/, server/, workers/ and cli/ share. Include it after
# setting nothing; it sets BUILD, CFLAGS, WARN, SANFLAGS, KF_CFLAGS (add to compiles), KF_LIBS
# (the libraries libkforge.a needs; programs add what else they use) and KF_LIB (the archive).
#   make -C DIR BUILD=$(abspath build) [CC=...] [CFLAGS=...] [SANITIZE=address,undefined]
BUILD    ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../build)
CFLAGS   ?= -O2 -g
SANITIZE ?=
WARN     := -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE
SANFLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)
KF_ROOT  := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
KF_GEN   := $(BUILD)/gen
KF_LIB   := $(BUILD)/libkforge.a
KF_CFLAGS := -I$(KF_ROOT)/lib -I$(KF_GEN) -I$(shell pg_config --includedir) \
             $(shell pkg-config --cflags jansson hiredis libcrypto)
KF_LIBS  := $(KF_LIB) -L$(shell pg_config --libdir) -lpq \
            $(shell pkg-config --libs jansson hiredis libcrypto) -lpthread -lm
