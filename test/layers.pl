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
use strict;
use warnings;

my $src = shift // 'src';
my (%defines, %uses, %file_of);

my @objs = sort glob("$src/*.o $src/*/*.o");
die "layers.pl: no object files under $src (run make first)\n" unless @objs;

for my $o (@objs)
{
	(my $f = $o) =~ s/\.o$/.c/;
	$f =~ s{^\Q$src\E/}{};
	open(my $nm, '-|', 'nm', $o) or die "nm $o: $!";
	while (<$nm>)
	{
		if (/^\s+U (\S+)/) { $uses{$f}{$1} = 1; }
		elsif (/^[0-9a-f]+ [TDBRC] (\S+)/) { $defines{$f}{$1} = 1; $file_of{$1} = $f; }
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
print "layers: $nfiles files, no cycle, no call up\n";
exit 0;
