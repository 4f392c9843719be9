#!/usr/bin/perl
#
# test/layers.pl: check that the extension's files call down only.
#
#   perl test/layers.pl [SRCDIR]		(after `make`; SRCDIR defaults to src)
#
# Reads the symbols each object file defines and the ones it uses (nm), and
# builds the graph "file A calls a function or reads a variable defined in
# file B".  It fails (exit 1), naming the files, when
#   - the files of one subsystem (a folder of src/) call each other in a
#     cycle, or
#   - the subsystems call each other in a cycle, or
#   - a file calls a file of a higher layer than its own, where
#     src/layers.txt gives both files' layers (see that file).
# Calls through function pointers (a routine struct, a registered hook)
# are not edges: that is how a lower layer is handed policy from above.
#
# Routines.  A reference to a routine is not an edge either: a routine is
# a table of calls through pointers (window_format.h's FbfFilterRoutine,
# as PostgreSQL's IndexAmRoutine), so the file that looks one up (a table
# of routines by id, in a low layer) calls through it, not into the file
# that defines it.  A routine, here, is precisely a global data object
#   - whose name is Fbf<Something>Routine (the name says it: give it only
#     to a struct of function pointers and the capabilities beside them),
#   - that is const: it lives in .rodata, or in .data.rel.ro, where a
#     const object holding addresses goes in position-independent code
#     and which is read-only once the library is loaded.
# The file that defines a routine still references each function it holds,
# as any other use: that is an edge, so a routine belongs in a file at or
# above every function it names.  Any other variable, a writable routine
# included, is an edge to the file that defines it.
#
# test/layers_test.sh checks this script: that it finds a call up, a
# cycle and a reference to a writable routine planted into a copy of the
# object files, and passes a planted reference to a const routine.
#
use strict;
use warnings;

my $src = shift // 'src';
my (%defines, %uses, %file_of, %routine);

my @objs = sort glob("$src/*.o $src/*/*.o");
die "layers.pl: no object files under $src (run make first)\n" unless @objs;

for my $o (@objs)
{
	(my $f = $o) =~ s/\.o$/.c/;
	$f =~ s{^\Q$src\E/}{};
	# System V format: name|value|class|type|size|line|section
	open(my $nm, '-|', 'nm', '--format=sysv', $o) or die "nm $o: $!";
	while (<$nm>)
	{
		my ($name, $value, $class, $type, $size, $line, $section) =
		  map { s/^\s+|\s+$//gr } split /\|/;
		next unless defined $section;
		if ($class eq 'U') { $uses{$f}{$name} = 1; }
		elsif ($class =~ /^[TDBRC]$/)
		{
			$defines{$f}{$name} = 1;
			$file_of{$name} = $f;
			# a routine (see the top of this file)
			$routine{$name} = 1
			  if $name =~ /^Fbf\w+Routine$/ && $type eq 'OBJECT' &&
			  $section =~ /^\.(rodata|data\.rel\.ro)(\.|$)/;
		}
	}
	close $nm;
}

# file -> file edges, with one symbol as the witness
my %edge;
for my $f (keys %uses)
{
	for my $s (keys %{ $uses{$f} })
	{
		my $g = $file_of{$s};
		next unless defined $g && $g ne $f;
		next if $routine{$s};	# a call through pointers
		$edge{$f}{$g} //= $s;
	}
}

sub folder { my ($f) = @_; return $f =~ m{^(.*)/} ? $1 : '.'; }

# Tarjan's strongly connected components of a graph given as {node => {node => 1}}
sub sccs
{
	my ($nodes, $succ) = @_;
	my ($index, @stack, %on, %idx, %low, @out) = (0);
	my $visit;
	$visit = sub {
		my ($v) = @_;
		$idx{$v} = $low{$v} = $index++;
		push @stack, $v;
		$on{$v} = 1;
		for my $w (sort keys %{ $succ->{$v} // {} })
		{
			if (!defined $idx{$w}) { $visit->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v}; }
			elsif ($on{$w}) { $low{$v} = $idx{$w} if $idx{$w} < $low{$v}; }
		}
		if ($low{$v} == $idx{$v})
		{
			my @c;
			my $w;
			do { $w = pop @stack; $on{$w} = 0; push @c, $w; } while ($w ne $v);
			push @out, [ sort @c ] if @c > 1;
		}
	};
	$visit->($_) for grep { !defined $idx{$_} } sort @$nodes;
	return @out;
}

my $failures = 0;

# 1. no cycle among the files of one folder
my %folders;
$folders{ folder($_) }{$_} = 1 for keys %uses;
for my $d (sort keys %folders)
{
	my %succ;
	for my $f (keys %{ $folders{$d} })
	{
		for my $g (keys %{ $edge{$f} // {} })
		{
			$succ{$f}{$g} = 1 if folder($g) eq $d;
		}
	}
	for my $c (sccs([ keys %{ $folders{$d} } ], \%succ))
	{
		$failures++;
		print "cycle in $d/: @$c\n";
		for my $f (@$c)
		{
			for my $g (sort grep { $succ{$f}{$_} } @$c)
			{
				print "    $f -> $g ($edge{$f}{$g})\n";
			}
		}
	}
}

# 2. no cycle among the folders
my %dsucc;
for my $f (keys %edge)
{
	for my $g (keys %{ $edge{$f} })
	{
		$dsucc{ folder($f) }{ folder($g) } //= "$f -> $g ($edge{$f}{$g})"
		  if folder($f) ne folder($g);
	}
}
for my $c (sccs([ keys %folders ], \%dsucc))
{
	$failures++;
	print "cycle between folders: @$c\n";
	for my $a (@$c)
	{
		for my $b (sort grep { $dsucc{$a}{$_} } @$c)
		{
			print "    $dsucc{$a}{$b}\n";
		}
	}
}

# 3. the declared layers: a file calls only files of its layer or below
my $manifest = "$src/layers.txt";
if (-f $manifest)
{
	my %layer;
	open(my $m, '<', $manifest) or die "$manifest: $!";
	while (<$m>)
	{
		s/#.*//;
		next unless /\S/;
		my ($n, @files) = split;
		die "$manifest: bad line: $_" unless $n =~ /^\d+$/ && @files;
		$layer{$_} = $n for @files;
	}
	close $m;
	for my $f (sort keys %edge)
	{
		next unless defined $layer{$f};
		for my $g (sort keys %{ $edge{$f} })
		{
			next unless defined $layer{$g};
			if ($layer{$g} > $layer{$f})
			{
				$failures++;
				print "calls up: $f (layer $layer{$f}) -> $g (layer $layer{$g}) ($edge{$f}{$g})\n";
			}
		}
	}
	# every listed folder's files are in the manifest
	my %listed_dirs = map { folder($_) => 1 } keys %layer;
	for my $f (sort keys %uses)
	{
		next unless $listed_dirs{ folder($f) };
		next if defined $layer{$f};
		$failures++;
		print "no layer: $f is not in $manifest\n";
	}
}

my $nfiles = scalar keys %uses;
if ($failures)
{
	print "layers: $failures problem(s) in $nfiles files\n";
	exit 1;
}
my @routines = sort grep { $routine{$_} } keys %routine;
print "layers: $nfiles files, no cycle, no call up",
  (@routines ? " (const routines, calls through pointers: @routines)" : ""), "\n";
exit 0;
